// Meta kernels for the gradients PyTorch ships without one (multi_margin_loss_backward,
// multilabel_margin_loss_backward, _ctc_loss_backward, fractional_max_pool3d_backward): the
// lowered kernel infers every output from the meta function, and torch.compile's fake tensors
// need one too. Each gradient has its input's shape.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

namespace torchtpu::aten {
namespace {

at::Tensor like_self(const at::Tensor& self) {
  return at::empty(self.sizes(), self.options().memory_format(at::MemoryFormat::Contiguous));
}

at::Tensor multi_margin_loss_backward(const at::Tensor&, const at::Tensor& self, const at::Tensor&,
                                      const at::Scalar&, const at::Scalar&,
                                      const std::optional<at::Tensor>&, int64_t) {
  return like_self(self);
}

at::Tensor& multi_margin_loss_backward_out(const at::Tensor&, const at::Tensor& self,
                                           const at::Tensor&, const at::Scalar&, const at::Scalar&,
                                           const std::optional<at::Tensor>&, int64_t,
                                           at::Tensor& grad_input) {
  grad_input.resize_(self.sizes());
  return grad_input;
}

at::Tensor multilabel_margin_loss_backward(const at::Tensor&, const at::Tensor& self,
                                           const at::Tensor&, int64_t, const at::Tensor&) {
  return like_self(self);
}

at::Tensor& multilabel_margin_loss_backward_out(const at::Tensor&, const at::Tensor& self,
                                                const at::Tensor&, int64_t, const at::Tensor&,
                                                at::Tensor& grad_input) {
  grad_input.resize_(self.sizes());
  return grad_input;
}

at::Tensor ctc_loss_backward(const at::Tensor&, const at::Tensor& log_probs, const at::Tensor&,
                             at::IntArrayRef, at::IntArrayRef, const at::Tensor&,
                             const at::Tensor&, int64_t, bool) {
  return like_self(log_probs);
}

at::Tensor& ctc_loss_backward_out(const at::Tensor&, const at::Tensor& log_probs,
                                  const at::Tensor&, at::IntArrayRef, at::IntArrayRef,
                                  const at::Tensor&, const at::Tensor&, int64_t, bool,
                                  at::Tensor& grad_input) {
  grad_input.resize_(log_probs.sizes());
  return grad_input;
}

at::Tensor fractional_max_pool3d_backward(const at::Tensor&, const at::Tensor& self,
                                          at::IntArrayRef, at::IntArrayRef, const at::Tensor&) {
  return like_self(self);
}

at::Tensor& fractional_max_pool3d_backward_out(const at::Tensor&, const at::Tensor& self,
                                               at::IntArrayRef, at::IntArrayRef,
                                               const at::Tensor&, at::Tensor& grad_input) {
  grad_input.resize_(self.sizes());
  return grad_input;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("fractional_max_pool3d_backward", TORCH_FN(fractional_max_pool3d_backward));
  m.impl("fractional_max_pool3d_backward.grad_input",
         TORCH_FN(fractional_max_pool3d_backward_out));
  m.impl("_ctc_loss_backward", TORCH_FN(ctc_loss_backward));
  m.impl("_ctc_loss_backward.out", TORCH_FN(ctc_loss_backward_out));
  m.impl("multi_margin_loss_backward", TORCH_FN(multi_margin_loss_backward));
  m.impl("multi_margin_loss_backward.grad_input", TORCH_FN(multi_margin_loss_backward_out));
  m.impl("multilabel_margin_loss_backward", TORCH_FN(multilabel_margin_loss_backward));
  m.impl("multilabel_margin_loss_backward.grad_input",
         TORCH_FN(multilabel_margin_loss_backward_out));
}

}  // namespace torchtpu::aten
