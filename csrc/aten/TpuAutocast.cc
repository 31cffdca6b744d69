// Autocast for "tpu" (the AutocastPrivateUse1 dispatch key): PyTorch's cast policy for
// accelerators, from the op lists ATen/autocast_mode.h publishes for backends to reuse. Every op
// not listed falls through to the tpu kernel unchanged; the listed ones cast their floating-point
// arguments first (to the autocast dtype, to float32, or to the widest argument type) and
// redispatch, so the casts and the op itself lower on the device like any other call.
#include <ATen/autocast_mode.h>
#include <torch/library.h>
#if __has_include(<ATen/core/Dimname.h>)  // named tensors, in torch 2.11's op lists, not 2.13's
#include <ATen/core/Dimname.h>
#define TORCHTPU_HAS_DIMNAMES 1
#endif

namespace torchtpu::aten {
namespace {

// The names the op lists' signatures use unqualified.
#ifdef TORCHTPU_HAS_DIMNAMES
using at::DimnameList;
#endif
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// binary_cross_entropy on probabilities loses too much in low precision: PyTorch refuses it under
// autocast on CUDA and XPU, with this message.
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&,
                                       const std::optional<at::Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
              "layer.\nIn this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\nor "
              "torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits "
              "are\nsafe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

#define TPU_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  // Matmuls, convolutions, attention: low precision.
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER_PRECISION)
  TPU_LOWER_PRECISION(conv1d, padding)
  TPU_LOWER_PRECISION(conv2d, padding)
  TPU_LOWER_PRECISION(conv3d, padding)
  TPU_LOWER_PRECISION(_scaled_dot_product_efficient_attention)
  TPU_LOWER_PRECISION(_scaled_dot_product_cudnn_attention)

  // Ops whose range or accumulation float16/bfloat16 cannot hold: float32. Softmax, sums and the
  // like keep an explicit dtype argument if the caller gave one.
  AT_FORALL_FP32(TPU_FP32)
  TPU_FP32(batch_norm)
  // cross_entropy passes its input's dtype on to log_softmax, which would keep it low: as
  // PyTorch's CPU policy does, the whole loss runs in float32.
  TPU_FP32(cross_entropy_loss)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

  // Ops mixing several inputs: the widest floating type among them.
  AT_FORALL_PROMOTE(TPU_PROMOTE)
  TPU_PROMOTE(cat)
  TPU_PROMOTE(stack)
  TPU_PROMOTE(index_copy)

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace
}  // namespace torchtpu::aten
