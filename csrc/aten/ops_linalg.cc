// Linear algebra that the generic lowered kernel cannot serve alone.
// - linalg_lstsq.out has no meta function (whether it returns residuals depends on the rank it
//   finds): its kernel checks the arguments with PyTorch's messages, sizes the outputs, records the
//   rule (csrc/lowering/decompositions.cc) and, for gelsd/gelss on a tall A, waits for the rank
//   once. geqrf has no meta function either: the one here lets the generic kernel serve it.
// - The legacy torch.cholesky checks its factorization, and det and slogdet return the
//   layout-dependent LU their backward formulas expect.
#include <ATen/ExpandUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/addbmm.h>
#include <ATen/ops/addr.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <limits>
#include <string>
#include <string_view>

#include "aten/ops.h"
#include "aten/tensor_view.h"

namespace torchtpu::aten {
namespace {

std::vector<int64_t> batch_of(const at::Tensor& t) {
  return std::vector<int64_t>(t.sizes().begin(), t.sizes().end() - 2);
}

std::vector<int64_t> with(std::vector<int64_t> dims, std::initializer_list<int64_t> tail) {
  dims.insert(dims.end(), tail);
  return dims;
}

// (self, b, rcond, driver, solution, residuals, rank, singular_values) -> the four outputs.
void lstsq_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  size_t count = op.schema().arguments().size();
  std::vector<c10::IValue> args(stack->end() - count, stack->end());
  const at::Tensor self = args[0].toTensor(), other = args[1].toTensor();
  const char* where = "torch.linalg.lstsq: ";
  TORCH_CHECK(self.dim() >= 2, where, "input must have at least 2 dimensions.");
  TORCH_CHECK(other.dim() >= 1, where, "other must have at least 1 dimension.");
  TORCH_CHECK(self.scalar_type() == other.scalar_type(), where,
              "Expected input and other to have the same dtype, but got input's dtype ",
              self.scalar_type(), " and other's dtype ", other.scalar_type());
  int64_t dim_diff = self.dim() - other.dim();
  TORCH_CHECK(0 <= dim_diff && dim_diff <= 1, where,
              "input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) "
              "<= 1");
  bool vector = dim_diff == 1;
  at::Tensor rhs = vector ? other.unsqueeze(-1) : other;
  TORCH_CHECK(self.size(-2) == rhs.size(-2), where,
              vector ? "input.size(-2) should match other.size(-1)"
                     : "input.size(-2) should match other.size(-2)");
  std::string driver = args[3].isNone() ? "gelsy" : std::string(args[3].toStringRef());
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              where, "parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  TORCH_CHECK(self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble ||
                  self.is_complex(),
              "This function doesn't handle types other than float and double");
  // The outputs' dtypes as the CPU checks them: the solution castable from the input's, the
  // residuals and singular values from its real type, the rank from int64.
  const at::Tensor &solution_out = args[4].toTensor(), &residuals_out = args[5].toTensor(),
                   &rank_out = args[6].toTensor(), &singular_values_out = args[7].toTensor();
  at::ScalarType real = c10::toRealValueType(self.scalar_type());
  at::native::checkLinalgCompatibleDtype("torch.linalg.lstsq", solution_out, self, "solution");
  at::native::checkLinalgCompatibleDtype("torch.linalg.lstsq", residuals_out.scalar_type(), real,
                                         "residuals");
  at::native::checkLinalgCompatibleDtype("torch.linalg.lstsq", rank_out.scalar_type(), at::kLong,
                                         "rank");
  at::native::checkLinalgCompatibleDtype("torch.linalg.lstsq", singular_values_out.scalar_type(),
                                         real, "singular_values");
  int64_t m = self.size(-2), n = self.size(-1), k = rhs.size(-1);
  std::vector<int64_t> batch = at::infer_size(batch_of(self), batch_of(rhs));
  int64_t batch_count = 1;
  for (int64_t d : batch) batch_count *= d;
  // Empty matrices run on the CPU.
  if (m == 0 || n == 0 || k == 0 || batch_count == 0) {
    cpu_fallback(op, stack);
    return;
  }
  torch::jit::drop(*stack, count);
  at::Tensor solution = args[4].toTensor(), residuals = args[5].toTensor(),
             rank = args[6].toTensor(), singular_values = args[7].toTensor();
  c10::Device device = common_device({&self, &other, &solution, &residuals, &rank,
                                      &singular_values});
  c10::DeviceGuard guard(device);
  bool has_residuals = m > n && driver != "gelsy";
  bool svd_driver = driver == "gelsd" || driver == "gelss";
  solution.resize_(vector ? with(batch, {n}) : with(batch, {n, k}));
  residuals.resize_(has_residuals ? with(batch, {k}) : std::vector<int64_t>{0});
  rank.resize_(driver != "gels" ? batch_of(self) : std::vector<int64_t>{0});
  singular_values.resize_(svd_driver ? with(batch_of(self), {std::min(m, n)})
                                     : std::vector<int64_t>{0});
  double eps = real == at::kFloat ? std::numeric_limits<float>::epsilon()
                                   : std::numeric_limits<double>::epsilon();
  double rcond = args[2].isNone() ? eps * static_cast<double>(std::max(m, n)) : args[2].toDouble();
  args[1] = rhs;
  args[2] = rcond < 0 ? eps : rcond;  // LAPACK takes a negative rcond as the machine epsilon
  args[3] = driver;
  run_rule("linalg_lstsq", op.schema(), args,
           {solution, has_residuals ? residuals : at::Tensor(),
            driver != "gels" ? rank : at::Tensor(), svd_driver ? singular_values : at::Tensor()},
           device);
  // As LAPACK's gelsd/gelss, the residuals only when every matrix has full column rank.
  if (has_residuals && svd_driver && !at::all(at::eq(rank, n)).item<bool>()) residuals.resize_({0});
  for (const at::Tensor& t : {solution, residuals, rank, singular_values}) stack->push_back(t);
}

std::vector<int64_t> tau_size(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()) || self.is_complex(),
                              "\"geqrf\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  return with(batch_of(self), {std::min(self.size(-2), self.size(-1))});
}

std::tuple<at::Tensor, at::Tensor> geqrf_meta(const at::Tensor& self) {
  std::vector<int64_t> tau = tau_size(self);
  return {at::empty(self.sizes(), self.options()), at::empty(tau, self.options())};
}

std::tuple<at::Tensor&, at::Tensor&> geqrf_out_meta(const at::Tensor& self, at::Tensor& a,
                                                     at::Tensor& tau) {
  std::vector<int64_t> tau_dims = tau_size(self);
  a.resize_(self.sizes());
  tau.resize_(tau_dims);
  return {a, tau};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("linalg_lstsq.out", torch::CppFunction::makeFromBoxedFunction<&lstsq_kernel>());
}

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("geqrf", TORCH_FN(geqrf_meta));
  m.impl("geqrf.a", TORCH_FN(geqrf_out_meta));
}

// linalg_cholesky_ex on the device, whose info is then checked as PyTorch's own kernel checks it,
// raising LinAlgError for a matrix that is not positive-definite (a read of info on the host, as
// on CUDA; torch.linalg.cholesky_ex factors without one). XLA's cholesky alone gives NaN there,
// and no info.
at::Tensor cholesky(const at::Tensor& self, bool upper) {
  TORCH_WARN_ONCE("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be ",
                  "removed in a future PyTorch release.");
  if (self.numel() == 0) return at::empty_like(self, LEGACY_CONTIGUOUS_MEMORY_FORMAT);
  at::native::squareCheckInputs(self, "cholesky");
  at::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(
      t == at::kFloat || t == at::kDouble || t == at::kComplexFloat || t == at::kComplexDouble,
      "\"cholesky\" not implemented for '", c10::toString(t), "'");
  auto [factor, info] = at::linalg_cholesky_ex(self, upper, /*check_errors=*/false);
  at::_linalg_check_errors(info, "cholesky", self.dim() == 2);
  return factor;
}

at::Tensor& cholesky_out(const at::Tensor& self, bool upper, at::Tensor& out) {
  at::native::checkSameDevice("cholesky", out, self);
  at::native::checkLinalgCompatibleDtype("cholesky", out, self);
  at::Tensor factor = torchtpu::aten::cholesky(self, upper);
  at::native::resize_output(out, factor.sizes());
  out.copy_(factor);
  return out;
}

void prepare_linalg_arguments(const c10::OperatorHandle& op, std::vector<c10::IValue>& args) {
  std::string_view name = op.schema().name();  // run for every op: a length check first
  if (name != "aten::_linalg_det" && name != "aten::_linalg_slogdet") return;
  // PyTorch's kernels factor A^T when A is contiguous and real (det(A^T) = det(A), and LAPACK
  // wants column-major), and their backward solves with the LU they returned on that
  // understanding: so the LU must be of A^T too.
  const at::Tensor& a = args[0].toTensor();
  if (a.dim() >= 2 && a.is_contiguous() && !a.is_complex()) args[0] = a.mT();
}

// PyTorch's composite addr_ is addr.out(self, self, ...), whose math resizes self to the outer
// product's shape; the CPU and CUDA kernels refuse a self of another shape, with these messages.
at::Tensor& addr_(at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                  const at::Scalar& beta, const at::Scalar& alpha) {
  TORCH_CHECK(vec1.dim() == 1, "addr: Expected 1-D argument vec1, but got ", vec1.dim(), "-D");
  TORCH_CHECK(vec2.dim() == 1, "addr: Expected 1-D argument vec2, but got ", vec2.dim(), "-D");
  TORCH_CHECK(self.dim() == 2, "2D tensor expected, got ", self.dim(), "D tensor for input");
  TORCH_CHECK(self.size(0) == vec1.size(0) && self.size(1) == vec2.size(0),
              "size mismatch, input: ", self.sizes(), ", v1: ", vec1.sizes(), ", v2: ",
              vec2.sizes());
  return at::addr_out(self, self, vec1, vec2, beta, alpha);
}

// addbmm_ resizes a self that broadcasts to the product's shape, as the CPU and CUDA kernels do
// (addmm_ and baddbmm_ refuse one), where PyTorch's meta function refuses it.
at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                    const at::Scalar& beta, const at::Scalar& alpha) {
  if (batch1.dim() == 3 && batch2.dim() == 3 &&
      self.sizes().equals({batch1.size(1), batch2.size(2)})) {
    return at::addbmm_out(self, self, batch1, batch2, beta, alpha);
  }
  at::Tensor result = at::addbmm(self, batch1, batch2, beta, alpha);
  self.resize_(result.sizes());
  return self.copy_(result);
}

}  // namespace torchtpu::aten
