// The legacy torch.cholesky: linalg_cholesky_ex on the device, whose info is then checked as
// PyTorch's own kernel checks it, raising LinAlgError for a matrix that is not positive-definite
// (a read of info on the host, as on CUDA; torch.linalg.cholesky_ex factors without one). XLA's
// cholesky alone gives NaN there, and no info.
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <c10/util/Exception.h>

#include "aten/ops.h"

namespace torchtpu::aten {

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

}  // namespace torchtpu::aten
