// The inference fast paths of nn.MultiheadAttention and nn.TransformerEncoderLayer
// (`_native_multi_head_attention`, `_transformer_encoder_layer_fwd`: eval mode, no gradients,
// batch_first), which PyTorch takes on a PrivateUse1 device as on CUDA. Its kernels exist for the
// CPU and CUDA only, so the fallback had copied every weight to the host and back each call; here
// they are their math in ATen ops. A nested input (what TransformerEncoder makes of a batch with
// a padding mask, ops_nested.cc) runs padded, its lengths a key padding mask.
#include <ATen/TensorOperators.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "aten/ops.h"

namespace torchtpu::aten {
namespace {

// Softmax of the scores [B, H, L, S] over S with the fast path's mask, whose true (or nonzero)
// entries are left out: [B, S] for mask_type 1 (key padding), otherwise broadcast to the scores
// ([L, S], [B, H, L, S]). A row with every key left out is NaN, as PyTorch's masked softmax
// gives it.
at::Tensor masked_softmax(const at::Tensor& scores, const std::optional<at::Tensor>& mask,
                          std::optional<int64_t> mask_type) {
  if (!mask.has_value() || !mask->defined()) return at::softmax(scores, -1);
  at::Tensor out = mask->scalar_type() == at::kBool ? *mask : mask->ne(0);
  if (mask_type == 1 && out.dim() == 2) out = out.view({scores.size(0), 1, 1, scores.size(3)});
  double inf = std::numeric_limits<double>::infinity();
  return at::softmax(at::where(out, -inf, scores), -1);
}

std::tuple<at::Tensor, at::Tensor> multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
    int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias,
    const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    const std::optional<at::Tensor>& mask, bool need_weights, bool average_attn_weights,
    std::optional<int64_t> mask_type) {
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.size(2) == embed_dim, "passed-in embed_dim ", embed_dim,
              " didn't match last dim of query ", query.size(2));
  TORCH_CHECK(key.dim() == 3 && value.dim() == 3 && query.sizes() == key.sizes() &&
                  key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2 && qkv_weight.size(0) == 3 * embed_dim &&
                  qkv_weight.size(1) == embed_dim,
              "expected `qkv_weight` of shape [3 * embed_dim, embed_dim]");
  TORCH_CHECK(qkv_bias.dim() == 1 && qkv_bias.size(0) == 3 * embed_dim,
              "expected `qkv_bias` of shape [3 * embed_dim]");
  TORCH_CHECK(embed_dim % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");
  if (query.numel() == 0) return {at::empty_like(query), at::Tensor()};
  int64_t batch = query.size(0), length = query.size(1), per_head = embed_dim / num_head;
  std::vector<at::Tensor> w = qkv_weight.chunk(3, 0), b = qkv_bias.chunk(3, 0);
  auto heads = [&](const at::Tensor& x, int i) {  // [B, L, E] -> [B, H, L, E / H]
    return at::linear(x, w[i], b[i]).view({batch, length, num_head, per_head}).transpose(1, 2);
  };
  at::Tensor q = heads(query, 0) * (1.0 / std::sqrt(static_cast<double>(per_head)));
  at::Tensor probs = masked_softmax(at::matmul(q, heads(key, 1).transpose(-2, -1)), mask,
                                    mask_type);
  at::Tensor context =
      at::matmul(probs, heads(value, 2)).transpose(1, 2).reshape({batch, length, embed_dim});
  at::Tensor out = at::linear(context, proj_weight, proj_bias);
  if (!need_weights) return {out, at::Tensor()};
  return {out, average_attn_weights ? probs.sum(1) / num_head : probs};
}

at::Tensor transformer_encoder_layer(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1,
    const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  if (src.numel() == 0) return src.clone();
  auto norm = [&](const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
    return at::layer_norm(x, {embed_dim}, weight, bias, eps);
  };
  auto attend = [&](const at::Tensor& x) {
    return std::get<0>(multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias,
                                            proj_weight, proj_bias, mask, false, true,
                                            mask_type));
  };
  auto feed_forward = [&](const at::Tensor& x) {
    at::Tensor hidden = at::linear(x, ffn_weight_1, ffn_bias_1);
    hidden = use_gelu ? at::gelu(hidden) : at::relu(hidden);
    return at::linear(hidden, ffn_weight_2, ffn_bias_2);
  };
  if (norm_first) {
    at::Tensor x = src + attend(norm(src, norm_weight_1, norm_bias_1));
    return x + feed_forward(norm(x, norm_weight_2, norm_bias_2));
  }
  at::Tensor x = norm(src + attend(src), norm_weight_1, norm_bias_1);
  return norm(x + feed_forward(x), norm_weight_2, norm_bias_2);
}

// The layer on a nested batch: on its padded form, each matrix's rows past its length hidden from
// attention as keys (queries there compute what no one reads), the result a nested view again.
at::Tensor nested_transformer_encoder_layer(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias,
    bool use_gelu, bool norm_first, double eps, const at::Tensor& norm_weight_1,
    const at::Tensor& norm_bias_1, const at::Tensor& norm_weight_2,
    const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1, const at::Tensor& ffn_bias_1,
    const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  TORCH_CHECK(!mask.has_value() || !mask->defined(), "NestedTensor with mask is not supported yet");
  std::optional<PaddedNested> in = to_padded_nested(src);
  TORCH_CHECK(in.has_value(), "_transformer_encoder_layer_fwd: expected a nested tensor of "
              "matrices of one width (its tokens' embeddings)");
  // The padded rows are zeros first: attention weighs them by 0, which keeps a NaN or inf there
  // (never packed on the CPU) out of the real rows.
  at::Tensor padding = padding_positions(*in);
  at::Tensor rows = at::where(padding.unsqueeze(2), at::Scalar(0.0), in->padded);
  at::Tensor out = transformer_encoder_layer(
      rows, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu,
      norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1,
      ffn_bias_1, ffn_weight_2, ffn_bias_2, padding, /*mask_type=*/1);
  return nested_view_of_padded(out.contiguous(), in->lengths);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(nested_transformer_encoder_layer));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", TORCH_FN(multi_head_attention));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(transformer_encoder_layer));
}

}  // namespace torchtpu::aten
