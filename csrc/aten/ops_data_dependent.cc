// Ops whose result shape depends on tensor values. Each waits for the device once (for a count,
// a boolean or lengths) and then runs on the device like any other op.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_ctc_loss.h>
#include <ATen/ops/_ctc_loss_backward.h>
#include <ATen/ops/all.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/index.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sum.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>

#include "aten/ops.h"
#include "aten/tensor_view.h"

namespace torchtpu::aten {

at::Tensor nonzero(const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  int64_t n = self.numel() == 0 ? 0 : at::ne(self, 0).sum().item<int64_t>();
  at::Tensor out = at::empty({n, self.dim()}, self.options().dtype(at::kLong));
  if (n == 0 || self.dim() == 0) {
    if (n > 0) out.zero_();
    return out;
  }
  engine::Program p(self.device().index());
  int coords = p.apply("nonzero", {p.read(view_of(self))},
                       lowering::Attrs()
                           .set_type("type", hlo::ElementType::kS64)
                           .set("shape", std::vector<int64_t>{n, self.dim()}));
  p.write(view_of(out), coords);
  p.run();
  return out;
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type",
              out.scalar_type());
  at::Tensor result = torchtpu::aten::nonzero(self);
  out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  // As CUDA does: a 0-d operand takes part as a 1-element vector (x[mask] needs a dim to index).
  at::Tensor self_1d = self.dim() == 0 ? self.unsqueeze(0) : self;
  at::Tensor mask_1d = mask.dim() == 0 ? mask.unsqueeze(0) : mask;
  auto [s, m] = at::expand_outplace(self_1d, mask_1d);
  return at::index(*s, {std::optional<at::Tensor>(*m)});
}

// With the CPU kernel's checks: out= may not overlap itself or an operand.
at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.scalar_type() == out.scalar_type(),
              "masked_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(out);
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  at::Tensor result = torchtpu::aten::masked_select(self, mask);
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

// bincount: one wait for the smallest and largest value (the checks and the length), then an
// index_add on the device.
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights,
                    int64_t minlength) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"bincount_tpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  bool weighted = weights.has_value() && weights->defined();
  TORCH_CHECK(!weighted || (weights->dim() == 1 && weights->size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  c10::DeviceGuard guard(self.device());
  int64_t length = minlength;
  if (self.numel() > 0) {
    auto [low, high] = at::aminmax(self);
    TORCH_CHECK(low.item<int64_t>() >= 0,
                "bincount only supports 1-d non-negative integral inputs.");
    length = std::max(length, high.item<int64_t>() + 1);
  }
  // The CPU's result types: int64 counts; float32 for float32 weights, float64 for all others.
  at::ScalarType type = !weighted ? at::kLong
                        : weights->scalar_type() == at::kFloat ? at::kFloat
                                                               : at::kDouble;
  at::Tensor out = at::zeros({length}, self.options().dtype(type));
  if (self.numel() == 0) return out;
  at::Tensor values = weighted ? weights->to(type) : at::ones({self.size(0)}, out.options());
  // index_add takes int32 and int64 indices only.
  bool wide = self.scalar_type() == at::kInt || self.scalar_type() == at::kLong;
  return out.index_add_(0, wide ? self : self.to(at::kLong), values);
}

namespace {

// Lengths given as a tensor, read to the host (as the CPU kernel reads them) for the int[]
// overload, whose shapes depend on them.
std::vector<int64_t> host_lengths(const at::Tensor& lengths, const char* name) {
  TORCH_CHECK(at::isIntegralType(lengths.scalar_type(), /*includeBool=*/false), name,
              " must be integral");
  at::Tensor host = lengths.to(at::kCPU, at::kLong).contiguous();
  const int64_t* data = host.const_data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + host.numel());
}

}  // namespace

// _ctc_loss.Tensor and its gradient: the int[] overloads, lowered, on the lengths' values.
std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs,
                                                   const at::Tensor& targets,
                                                   const at::Tensor& input_lengths,
                                                   const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  std::vector<int64_t> il = host_lengths(input_lengths, "input_lengths");
  std::vector<int64_t> tl = host_lengths(target_lengths, "target_lengths");
  return at::_ctc_loss(log_probs, targets, il, tl, blank, zero_infinity);
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs,
                                    const at::Tensor& targets, const at::Tensor& input_lengths,
                                    const at::Tensor& target_lengths,
                                    const at::Tensor& neg_log_likelihood,
                                    const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  std::vector<int64_t> il = host_lengths(input_lengths, "input_lengths");
  std::vector<int64_t> tl = host_lengths(target_lengths, "target_lengths");
  return at::_ctc_loss_backward(grad, log_probs, targets, il, tl, neg_log_likelihood, log_alpha,
                                blank, zero_infinity);
}

bool equal(const at::Tensor& self, const at::Tensor& other) {
  common_device({&self, &other});
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::all(at::eq(self, other)).item<bool>();
}

// _unique, _unique2 and unique_consecutive without a dim: one wait for the number of distinct
// values (runs of equal values, after a sort unless consecutive), then the "unique" rule. A
// consecutive unique along a dim runs on the CPU.
void unique_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  size_t count = schema.arguments().size();
  auto flag = [&](const char* name) {
    std::optional<int> i = schema.argumentIndexWithName(name);
    return i.has_value() && (*stack)[stack->size() - count + *i].toBool();
  };
  bool consecutive = schema.name() == "aten::unique_consecutive";
  // Complex values have no order to sort by: the CPU says what it says of them.
  if ((consecutive && !(*stack)[stack->size() - 1].isNone()) ||
      (*stack)[stack->size() - count].toTensor().is_complex()) {
    cpu_fallback(op, stack);
    return;
  }
  bool return_inverse = flag("return_inverse"), return_counts = flag("return_counts");
  at::Tensor self = (*stack)[stack->size() - count].toTensor();
  torch::jit::drop(*stack, count);
  c10::DeviceGuard guard(self.device());
  int64_t total = self.numel();
  at::Tensor flat = self.reshape({total});
  int64_t n = 0;
  if (total > 0) {
    at::Tensor runs = consecutive ? flat : std::get<0>(at::sort(flat));
    n = 1 + at::ne(runs.slice(0, 1), runs.slice(0, 0, total - 1)).sum().item<int64_t>();
  }
  at::TensorOptions index = self.options().dtype(at::kLong);
  at::Tensor values = at::empty({n}, self.options());
  at::Tensor inverse = at::empty(return_inverse ? self.sizes() : at::IntArrayRef{0}, index);
  at::Tensor counts = at::empty({return_counts ? n : 0}, index);
  if (total > 0) {
    engine::Program p(self.device().index());
    std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
    int first = p.apply("unique", {p.read(view_of(self))},
                        lowering::Attrs()
                            .set_type("type", element_type(self.scalar_type()))
                            .set("shape", std::vector<int64_t>{n})
                            .set_type("type1", hlo::ElementType::kS64)
                            .set("shape1", sizes)
                            .set_type("type2", hlo::ElementType::kS64)
                            .set("shape2", std::vector<int64_t>{n})
                            .set("consecutive", int64_t{consecutive}),
                        3);
    p.write(view_of(values), first);
    if (return_inverse) p.write(view_of(inverse), first + 1);
    if (return_counts) p.write(view_of(counts), first + 2);
    p.run();
  }
  stack->emplace_back(values);
  stack->emplace_back(inverse);
  if (schema.returns().size() == 3) stack->emplace_back(counts);
}

}  // namespace torchtpu::aten
