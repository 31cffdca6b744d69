// Scaled dot-product attention as one op. F.scaled_dot_product_attention asks each backend which
// implementation to run (the _fused_sdp_choice stub); for tpu tensors it answers OVERRIDEABLE
// where its lowering covers the call, so the attention records one op (and its backward another)
// instead of PyTorch's math composite, some twenty ops. Everything else (dropout, grouped or
// broadcast heads, a mask that needs a gradient, empty inputs, forward-mode gradients, traced or
// wrapped tensors: Dynamo's fake tensors, functorch's) gets the composite, as does every call
// where torch.nn.attention.sdpa_kernel turned the fused backends off.
#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include "aten/ops.h"

namespace torchtpu::aten {
namespace {

constexpr int64_t kMath = 0, kOverrideable = 4;  // at::SDPBackend's values

// A tensor of the device's own, not a traced or wrapped one (whose sizes may be symbolic).
bool own(const at::Tensor& t) {
  static const c10::DispatchKeySet wrapped(
      {c10::DispatchKey::Python, c10::DispatchKey::Functionalize,
       c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::FuncTorchGradWrapper,
       c10::DispatchKey::Conjugate, c10::DispatchKey::Negative});
  return t.device().type() == c10::DeviceType::PrivateUse1 && t.layout() == c10::kStrided &&
         !t.is_nested() && !t.key_set().has_any(wrapped);
}

bool plain(const at::Tensor& t, at::ScalarType dtype) {
  return t.dim() == 4 && t.numel() > 0 && t.scalar_type() == dtype;
}

// Whether `mask` broadcasts to (B, H, L, S) (trailing dimensions align).
bool broadcasts(const at::Tensor& mask, at::IntArrayRef to) {
  if (mask.dim() > 4) return false;
  for (int64_t i = 1; i <= mask.dim(); ++i) {
    int64_t m = mask.size(-i);
    if (m != 1 && m != to[4 - i]) return false;
  }
  return true;
}

// Whether q, k, v and the mask (if any) are all the device's own tensors.
bool own_all(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
             const std::optional<at::Tensor>& mask) {
  return own(q) && own(k) && own(v) && !(mask.has_value() && mask->defined() && !own(*mask));
}

// Whether this file's op covers the call: 4-d tpu tensors of one floating dtype with equal batch
// and head sizes, no dropout, and a mask (bool or of that dtype, needing no gradient) that
// broadcasts to the scores.
bool fused_covers(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal) {
  bool has_mask = mask.has_value() && mask->defined();
  if (!own_all(q, k, v, mask)) return false;
  at::ScalarType t = q.scalar_type();
  if (!at::isFloatingType(t) || !plain(q, t) || !plain(k, t) || !plain(v, t) || dropout_p != 0) {
    return false;
  }
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || k.size(1) != q.size(1) ||
      v.size(1) != q.size(1) || k.size(3) != q.size(3) || v.size(2) != k.size(2)) {
    return false;
  }
  if (!has_mask) return true;
  const at::Tensor& m = *mask;
  return !is_causal && !m.requires_grad() &&
         (m.scalar_type() == at::kBool || m.scalar_type() == t) && m.numel() > 0 &&
         m.device() == q.device() && broadcasts(m, {q.size(0), q.size(1), q.size(2), k.size(2)});
}

// A forward-mode gradient (torch.autograd.forward_ad) on the tensor: the fused op has no forward
// derivative, the composite has.
bool dual(const at::Tensor& t) { return t._fw_grad(/*level=*/0).defined(); }

}  // namespace

// F.scaled_dot_product_attention's question to the backend: OVERRIDEABLE (this file's op) or
// MATH. torch.nn.attention.sdpa_kernel's choice holds: this op stands for the fused backends
// (flash, memory-efficient, cuDNN, overrideable), as a CUDA device's fused kernels do, and with
// them all turned off the call takes the composite (its double backward among what it gives);
// with the composite turned off too, or where the op does not cover the call, PyTorch's error.
// Traced or wrapped tensors always get the composite, so compiled graphs do not change.
int64_t choose_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> /*scale*/, bool /*enable_gqa*/) {
  if (!own_all(q, k, v, mask)) return kMath;
  bool has_mask = mask.has_value() && mask->defined();
  const at::Context& context = at::globalContext();
  bool fused = context.userEnabledOverrideableSDP() || context.userEnabledFlashSDP() ||
               context.userEnabledMemEfficientSDP() || context.userEnabledCuDNNSDP();
  if (fused && fused_covers(q, k, v, mask, dropout_p, is_causal) && !dual(q) && !dual(k) &&
      !dual(v) && !(has_mask && dual(*mask))) {
    return kOverrideable;
  }
  TORCH_CHECK(context.userEnabledMathSDP(),
              "No viable backend for scaled_dot_product_attention was found.");
  return kMath;
}

// _scaled_dot_product_fused_attention_overrideable(query, key, value, attn_bias?, dropout_p,
//   is_causal, return_debug_mask, scale?) -> (output, logsumexp, cum_seq_q, cum_seq_k, max_q,
//   max_k, philox_seed, philox_offset, debug_attn_mask): the last ones are for variable-length
//   batches and dropout, which this op does not take (undefined, and max_q/max_k the lengths).
void attention_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = take_arguments(op, stack);
  const at::Tensor& q = args[0].toTensor();
  const at::Tensor& k = args[1].toTensor();
  const at::Tensor& v = args[2].toTensor();
  std::optional<at::Tensor> mask;
  if (args[3].isTensor()) mask = args[3].toTensor();
  bool causal = args[5].toBool();
  TORCH_CHECK(fused_covers(q, k, v, mask, args[4].toDouble(), causal),
              "torchtpu: _scaled_dot_product_fused_attention_overrideable takes 4-d tpu tensors of "
              "one floating dtype with equal batch and head sizes and no dropout; "
              "F.scaled_dot_product_attention chooses it only for those");
  c10::Device device = q.device();
  c10::DeviceGuard guard(device);
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2), v.size(3)}, q.options());
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  run_rule("attention", op.schema(), args, {out, lse}, device);
  stack->push_back(out);
  stack->push_back(lse);
  stack->push_back(at::Tensor());
  stack->push_back(at::Tensor());
  stack->push_back(c10::IValue(q.size(2)));
  stack->push_back(c10::IValue(k.size(2)));
  for (int i = 0; i < 3; ++i) stack->push_back(at::Tensor());
}

// _scaled_dot_product_fused_attention_overrideable_backward(grad_out, query, key, value,
//   attn_bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
//   is_causal, philox_seed, philox_offset, scale?) -> (grad_query, grad_key, grad_value,
//   grad_attn_bias); the forward takes no mask that needs a gradient.
void attention_backward_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = take_arguments(op, stack);
  const at::Tensor& q = args[1].toTensor();
  const at::Tensor& k = args[2].toTensor();
  const at::Tensor& v = args[3].toTensor();
  TORCH_CHECK(!args[5].toBoolList().get(3),  // grad_input_mask
              "torchtpu: the fused attention gives no gradient for its mask");
  c10::Device device = q.device();
  c10::DeviceGuard guard(device);
  at::Tensor gq = at::empty(q.sizes(), q.options()), gk = at::empty(k.sizes(), k.options()),
             gv = at::empty(v.sizes(), v.options());
  run_rule("attention_backward", op.schema(), args, {gq, gk, gv}, device);
  stack->push_back(gq);
  stack->push_back(gk);
  stack->push_back(gv);
  stack->push_back(at::Tensor());
}

}  // namespace torchtpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchtpu::aten::choose_attention)
}  // namespace at::native
