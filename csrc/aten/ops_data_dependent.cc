// Ops whose result shape depends on tensor values. Each waits for the device once (for a count
// or a boolean) and then runs on the device like any other op.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/index.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/sum.h>
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

bool equal(const at::Tensor& self, const at::Tensor& other) {
  common_device({&self, &other});
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::all(at::eq(self, other)).item<bool>();
}

}  // namespace torchtpu::aten
