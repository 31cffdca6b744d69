// What the lowered linear algebra ops need from the PyTorch side: the legacy torch.cholesky, and
// the layout-dependent LU that det and slogdet return.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <c10/util/Exception.h>

#include "aten/ops.h"

namespace torchtpu::aten {

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
  const std::string& name = op.schema().name();
  if (name != "aten::_linalg_det" && name != "aten::_linalg_slogdet") return;
  // PyTorch's kernels factor A^T when A is contiguous and real (det(A^T) = det(A), and LAPACK
  // wants column-major), and their backward solves with the LU they returned on that
  // understanding: so the LU must be of A^T too.
  const at::Tensor& a = args[0].toTensor();
  if (a.dim() >= 2 && a.is_contiguous() && !a.is_complex()) args[0] = a.mT();
}

}  // namespace torchtpu::aten
