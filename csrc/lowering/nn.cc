// Neural-network ops: softmax, normalisation, embedding gradients, channel shuffle, and their
// backwards. Losses are in losses.cc, activations in activations.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "lowering/arith.h"
#include "lowering/matrix.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

Value sum_over(FunctionBuilder& b, const Value& x, const Dims& axes) {
  return reduce(b, x, axes, constant(b, x.shape.type, 0), "stablehlo.add");
}

// A reduction over `axes` spread back over them, to `dims`.
Value spread(FunctionBuilder& b, const Value& reduced, const Dims& dims, const Dims& axes) {
  return broadcast_to(b, keep_dims(b, reduced, dims, axes), dims);
}

Value sum_keep(FunctionBuilder& b, const Value& x, const Dims& axes) {
  return spread(b, sum_over(b, x, axes), x.shape.dims, axes);
}

Value max_keep(FunctionBuilder& b, const Value& x, const Dims& axes) {
  return spread(b, reduce_extreme(b, x, axes, true), x.shape.dims, axes);
}

Value as_row_if_scalar(FunctionBuilder& b, const Value& x) {
  return x.shape.rank() == 0 ? reshape(b, x, {1}) : x;
}

// _softmax / _log_softmax(self, dim, half_to_float)
LoweringRule softmax(bool log) {
  return [log](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    // A 0-d tensor is its one element along dim 0, so NaN and inf propagate as in a row.
    Value x = as_row_if_scalar(b, convert(b, v[0], c));
    Dims axes{normalize_dim(a.i("dim"), x.shape.rank())};
    Value shifted = sub(b, x, max_keep(b, x, axes));
    Value e = unary(b, "stablehlo.exponential", shifted);
    Value s = sum_keep(b, e, axes);
    Value y = log ? sub(b, shifted, unary(b, "stablehlo.log", s)) : divide(b, e, s);
    return Values{convert(b, reshape(b, y, v[0].shape.dims), t)};
  };
}

// _softmax_backward_data / _log_softmax_backward_data(grad_output, output, dim, input_dtype)
LoweringRule softmax_backward(bool log) {
  return [log](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    Value g = as_row_if_scalar(b, convert(b, v[0], c));
    Value y = as_row_if_scalar(b, convert(b, v[1], c));
    Dims axes{normalize_dim(a.i("dim"), g.shape.rank())};
    Value r = log ? sub(b, g, mul(b, unary(b, "stablehlo.exponential", y), sum_keep(b, g, axes)))
                  : mul(b, y, sub(b, g, sum_keep(b, mul(b, g, y), axes)));
    return Values{convert(b, reshape(b, r, v[0].shape.dims), t)};
  };
}

// The trailing `k` dimensions of a rank-r shape.
Dims trailing(size_t rank, size_t k) {
  Dims axes;
  for (size_t d = rank - k; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  return axes;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
Values layer_norm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  size_t k = a.ints("normalized_shape").size();
  Dims axes = trailing(x.shape.rank(), k);
  double n = 1;
  for (int64_t d : axes) n *= static_cast<double>(x.shape.dims[d]);
  size_t next = 1;
  bool has_weight = !a.has("weight_absent"), has_bias = !a.has("bias_absent");
  Value weight = has_weight ? v[next++] : Value{};
  Value bias = has_bias ? v[next++] : Value{};
  Value eps = v[next];
  Value mean = divide(b, sum_keep(b, x, axes), full(b, c, x.shape.dims, n));
  Value dev = sub(b, x, mean);
  Value var = divide(b, sum_keep(b, mul(b, dev, dev), axes), full(b, c, x.shape.dims, n));
  Value rstd = unary(b, "stablehlo.rsqrt", add(b, var, splat(b, eps, c, x.shape.dims)));
  Value y = mul(b, dev, rstd);
  if (has_weight) y = mul(b, y, broadcast_to(b, convert(b, weight, c), x.shape.dims));
  if (has_bias) y = add(b, y, broadcast_to(b, convert(b, bias, c), x.shape.dims));
  Dims stat = out_shape(a, 1);
  auto stat_of = [&](const Value& full_value) {
    Value one = slice(b, full_value, Dims(x.shape.rank(), 0), [&] {
      Dims limits = x.shape.dims;
      for (int64_t d : axes) limits[d] = 1;
      return limits;
    }());
    return convert(b, reshape(b, one, stat), out_type(a, 1));
  };
  return {convert(b, y, t), stat_of(mean), stat_of(rstd)};
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
// output_mask) -> (grad_input, grad_weight, grad_bias)
Values layer_norm_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  // The input's type where the mask leaves grad_input out.
  ElementType t = a.has("type") ? out_type(a) : v[1].shape.type, c = opmath(t);
  Value g = convert(b, v[0], c), x = convert(b, v[1], c);
  size_t k = a.ints("normalized_shape").size();
  size_t rank = x.shape.rank();
  Dims axes = trailing(rank, k), batch_axes;
  for (size_t d = 0; d < rank - k; ++d) batch_axes.push_back(static_cast<int64_t>(d));
  Dims kept = x.shape.dims;
  for (int64_t d : axes) kept[d] = 1;
  Value mean = broadcast_to(b, reshape(b, convert(b, v[2], c), kept), x.shape.dims);
  Value rstd = broadcast_to(b, reshape(b, convert(b, v[3], c), kept), x.shape.dims);
  bool has_weight = !a.has("weight_absent");
  Value weight = has_weight ? broadcast_to(b, convert(b, v[4], c), x.shape.dims) : Value{};
  double n = 1;
  for (int64_t d : axes) n *= static_cast<double>(x.shape.dims[d]);
  Value xhat = mul(b, sub(b, x, mean), rstd);
  Value gw = has_weight ? mul(b, g, weight) : g;
  Value sum_g = sum_keep(b, gw, axes), sum_gx = sum_keep(b, mul(b, gw, xhat), axes);
  Value inner =
      sub(b, sub(b, mul(b, gw, full(b, c, x.shape.dims, n)), sum_g), mul(b, xhat, sum_gx));
  Value dx = mul(b, divide(b, rstd, full(b, c, x.shape.dims, n)), inner);
  Dims param = Dims(x.shape.dims.end() - k, x.shape.dims.end());
  auto over_batch = [&](const Value& y) {
    return reshape(b, reduce(b, y, batch_axes, constant(b, c, 0), "stablehlo.add"), param);
  };
  Value dweight = over_batch(mul(b, g, xhat));
  Value dbias = over_batch(g);
  ElementType wt = a.has("type1") ? out_type(a, 1) : t;
  ElementType bt = a.has("type2") ? out_type(a, 2) : t;
  return {convert(b, dx, t), convert(b, dweight, wt), convert(b, dbias, bt)};
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
Values embedding_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = out_shape(a);  // [num_weights, dim]
  int64_t rows = shape[0], width = shape[1];
  Value idx = convert(b, v[1], ElementType::kS64);
  int64_t n = idx.shape.numel();
  idx = reshape(b, idx, {n, 1});
  Value g = reshape(b, convert(b, v[0], c), {n, width});
  int64_t padding = a.i("padding_idx");
  if (padding >= 0) {
    Value keep = compare(b, reshape(b, idx, {n}), full(b, ElementType::kS64, {n}, padding), "NE");
    g = select(b, broadcast_in_dim(b, keep, {n, width}, {0}), g, full(b, c, {n, width}, 0));
  }
  if (a.i("scale_grad_by_freq")) {
    Value ones = full(b, c, {n}, 1);
    Value counts = scatter(b, full(b, c, {rows}, 0), idx, ones, true,
                           "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
                           "[0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>");
    Value per = b.op("stablehlo.gather", {counts, idx}, Shape{c, {n}},
                     "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], "
                     "start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, "
                     "indices_are_sorted = false");
    g = divide(b, g, broadcast_in_dim(b, per, {n, width}, {0}));
  }
  Value grad = scatter(b, full(b, c, {rows, width}, 0), idx, g, true,
                       "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
                       "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
                       "index_vector_dim = 1>");
  return {convert(b, grad, t)};
}

// native_dropout_backward(grad_output, mask, scale)
Values dropout_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = out_shape(a);
  Value g = promote(b, v[0], c, shape);
  Value kept = mul(b, g, splat(b, v[2], c, shape));
  // grad * mask * scale, as in PyTorch: a dropped NaN stays NaN, a dropped -1. gives -0.
  return {convert(b, select(b, promote(b, v[1], ElementType::kPred, shape), kept,
                            mul(b, g, full(b, c, shape, 0))), t)};
}

// The per-channel axes of batch norm: every dim but 1.
Dims channel_reduction_axes(size_t rank) {
  Dims axes{0};
  for (size_t d = 2; d < rank; ++d) axes.push_back(static_cast<int64_t>(d));
  return axes;
}

Value per_channel(FunctionBuilder& b, const Value& v, const Dims& shape, ElementType c) {
  return broadcast_in_dim(b, convert(b, v, c), shape, {1});
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
//   -> (out, save_mean, save_invstd[, new running_mean, new running_var])
Values batch_norm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  const Dims& shape = x.shape.dims;
  size_t next = 1;
  auto optional = [&](const char* name) {
    return a.has(std::string(name) + "_absent") ? Value{} : v[next++];
  };
  Value weight = optional("weight"), bias = optional("bias");
  Value running_mean = optional("running_mean"), running_var = optional("running_var");
  Value momentum = convert(b, v[next], c), eps = convert(b, v[next + 1], c);
  Dims axes = channel_reduction_axes(shape.size());
  int64_t channels = shape[1];
  double n = static_cast<double>(x.shape.numel() / std::max<int64_t>(channels, 1));
  bool training = a.i("training") != 0;
  Value mean, var;
  if (training) {
    Value sum = reduce(b, x, axes, constant(b, c, 0), "stablehlo.add");
    mean = divide(b, sum, full(b, c, {channels}, n));
    Value dev = sub(b, x, per_channel(b, mean, shape, c));
    var = divide(b, reduce(b, mul(b, dev, dev), axes, constant(b, c, 0), "stablehlo.add"),
                 full(b, c, {channels}, n));
  } else {
    mean = convert(b, running_mean, c);
    var = convert(b, running_var, c);
  }
  Value invstd = unary(b, "stablehlo.rsqrt", add(b, var, broadcast_to(b, eps, {channels})));
  Value y = mul(b, sub(b, x, per_channel(b, mean, shape, c)), per_channel(b, invstd, shape, c));
  if (weight.name.size()) y = mul(b, y, per_channel(b, weight, shape, c));
  if (bias.name.size()) y = add(b, y, per_channel(b, bias, shape, c));
  Values out{convert(b, y, t)};
  if (training) {
    out.push_back(convert(b, mean, out_type(a, 1)));
    out.push_back(convert(b, invstd, out_type(a, 2)));
  } else {
    out.push_back(full(b, out_type(a, 1), {0}, 0));
    out.push_back(full(b, out_type(a, 2), {0}, 0));
  }
  if (training && running_mean.name.size()) {
    Value m = broadcast_to(b, momentum, {channels});
    Value keep = sub(b, full(b, c, {channels}, 1), m);
    Value unbiased = mul(b, var, full(b, c, {channels}, n / std::max(n - 1, 1.0)));
    out.push_back(convert(b, add(b, mul(b, keep, convert(b, running_mean, c)), mul(b, m, mean)),
                          out_type(a, 3)));
    out.push_back(convert(b, add(b, mul(b, keep, convert(b, running_var, c)), mul(b, m, unbiased)),
                          out_type(a, 4)));
  }
  return out;
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?, running_var?, save_mean?,
// save_invstd?, train, eps, output_mask) -> (grad_input, grad_weight, grad_bias); also
// batch_norm_backward, which names train `update` and save_invstd `save_var`, and takes a
// trailing `reserve` operand it ignores.
Values batch_norm_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = a.has("type") ? out_type(a) : v[1].shape.type, c = opmath(t);
  Value g = convert(b, v[0], c), x = convert(b, v[1], c);
  const Dims& shape = x.shape.dims;
  size_t next = 2;
  auto optional = [&](const char* name) {
    return a.has(std::string(name) + "_absent") ? Value{} : v[next++];
  };
  Value weight = optional("weight"), running_mean = optional("running_mean");
  Value running_var = optional("running_var"), save_mean = optional("save_mean");
  Value save_invstd = optional(a.has("update") ? "save_var" : "save_invstd");
  Value eps = convert(b, v[next], c);
  int64_t channels = shape[1];
  Dims axes = channel_reduction_axes(shape.size());
  double n = static_cast<double>(x.shape.numel() / std::max<int64_t>(channels, 1));
  bool train = a.i(a.has("update") ? "update" : "train") != 0;
  Value mean = convert(b, train ? save_mean : running_mean, c);
  Value invstd = train ? convert(b, save_invstd, c)
                       : unary(b, "stablehlo.rsqrt", add(b, convert(b, running_var, c),
                                                         broadcast_to(b, eps, {channels})));
  Value xhat = mul(b, sub(b, x, per_channel(b, mean, shape, c)), per_channel(b, invstd, shape, c));
  Value w = weight.name.size() ? per_channel(b, weight, shape, c) : full(b, c, shape, 1);
  Value gw = mul(b, g, w);
  Value dx;
  if (train) {
    Value sum_g = per_channel(b, reduce(b, gw, axes, constant(b, c, 0), "stablehlo.add"), shape, c);
    Value sum_gx = per_channel(b, reduce(b, mul(b, gw, xhat), axes, constant(b, c, 0),
                                         "stablehlo.add"), shape, c);
    Value inner = sub(b, sub(b, mul(b, gw, full(b, c, shape, n)), sum_g), mul(b, xhat, sum_gx));
    dx = mul(b, divide(b, per_channel(b, invstd, shape, c), full(b, c, shape, n)), inner);
  } else {
    dx = mul(b, gw, per_channel(b, invstd, shape, c));
  }
  Value dweight = reduce(b, mul(b, g, xhat), axes, constant(b, c, 0), "stablehlo.add");
  Value dbias = reduce(b, g, axes, constant(b, c, 0), "stablehlo.add");
  return {convert(b, dx, t), convert(b, dweight, a.has("type1") ? out_type(a, 1) : t),
          convert(b, dbias, a.has("type2") ? out_type(a, 2) : t)};
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd): the
// statistics, the normalization and the affine in float32 for half types, rounded once (PyTorch's
// composite for other devices, a batch norm and then the affine in the input's type, rounds twice).
Values group_norm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  int64_t n = a.i("N"), channels = a.i("C"), hw = a.i("HxW"), groups = a.i("group");
  int64_t per = channels / groups;
  Dims grouped{n, groups, per, hw}, stats{n, groups};
  Value x = reshape(b, convert(b, v[0], c), grouped);
  size_t next = 1;
  bool has_weight = !a.has("weight_absent"), has_bias = !a.has("bias_absent");
  Value weight = has_weight ? v[next++] : Value{};
  Value bias = has_bias ? v[next++] : Value{};
  // Each group's mean and 1/sqrt(variance + eps); an empty group's mean is 0 (its rstd NaN), as
  // on the CPU.
  auto group_sum = [&](const Value& y) {
    return reduce(b, y, {2, 3}, constant(b, c, 0), "stablehlo.add");
  };
  Value count = full(b, c, stats, static_cast<double>(per * hw));
  Value mean = per * hw == 0 ? full(b, c, stats, 0) : divide(b, group_sum(x), count);
  Value dev = sub(b, x, broadcast_in_dim(b, mean, grouped, {0, 1}));
  Value var = divide(b, group_sum(mul(b, dev, dev)), count);
  Value rstd = unary(b, "stablehlo.rsqrt", add(b, var, splat(b, v[next], c, stats)));
  Value y = mul(b, dev, broadcast_in_dim(b, rstd, grouped, {0, 1}));
  auto per_channel = [&](const Value& p) {
    return broadcast_in_dim(b, reshape(b, convert(b, p, c), {groups, per}), grouped, {1, 2});
  };
  if (has_weight) y = mul(b, y, per_channel(weight));
  if (has_bias) y = add(b, y, per_channel(bias));
  return {convert(b, reshape(b, y, v[0].shape.dims), t), convert(b, mean, out_type(a, 1)),
          convert(b, rstd, out_type(a, 2))};
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group, output_mask)
//   -> (grad_input, grad_weight, grad_bias)
Values group_norm_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = v[1].shape.type, c = opmath(t);
  Dims shape = v[1].shape.dims;
  int64_t n = a.i("N"), channels = a.i("C"), hw = a.i("HxW"), groups = a.i("group");
  int64_t per = channels / groups;
  Dims grouped{n, groups, per, hw};
  Value g = reshape(b, convert(b, v[0], c), grouped), x = reshape(b, convert(b, v[1], c), grouped);
  auto stat = [&](const Value& s) {
    return broadcast_in_dim(b, reshape(b, convert(b, s, c), {n, groups}), grouped, {0, 1});
  };
  Value mean = stat(v[2]), rstd = stat(v[3]);
  bool has_weight = !a.has("weight_absent");
  Value w = has_weight ? broadcast_in_dim(b, reshape(b, convert(b, v[4], c), {groups, per}),
                                          grouped, {1, 2})
                       : full(b, c, grouped, 1);
  Value xhat = mul(b, sub(b, x, mean), rstd);
  Value gw = mul(b, g, w);
  double m = static_cast<double>(per * hw);
  Dims group_axes{2, 3};
  Value sum_g = sum_keep(b, gw, group_axes), sum_gx = sum_keep(b, mul(b, gw, xhat), group_axes);
  Value inner = sub(b, sub(b, mul(b, gw, full(b, c, grouped, m)), sum_g), mul(b, xhat, sum_gx));
  Value dx = mul(b, divide(b, rstd, full(b, c, grouped, m)), inner);
  auto per_channel_sum = [&](const Value& y) {
    return reshape(b, reduce(b, y, {0, 3}, constant(b, c, 0), "stablehlo.add"), {channels});
  };
  Values out{convert(b, reshape(b, dx, shape), a.has("type") ? out_type(a) : t),
             convert(b, per_channel_sum(mul(b, g, xhat)), a.has("type1") ? out_type(a, 1) : t),
             convert(b, per_channel_sum(g), a.has("type2") ? out_type(a, 2) : t)};
  return out;
}

// channel_shuffle(self, groups): channels [groups, C / groups] transposed.
Values channel_shuffle(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value& x = v[0];
  Dims dims = x.shape.dims;
  int64_t groups = a.i("groups");
  Dims split{dims[0], groups, dims[1] / groups};
  Dims perm{0, 2, 1};
  for (size_t d = 2; d < dims.size(); ++d) {
    split.push_back(dims[d]);
    perm.push_back(static_cast<int64_t>(d + 1));
  }
  return {convert(b, reshape(b, transpose(b, reshape(b, x, split), perm), dims), out_type(a))};
}

}  // namespace

// Scaled dot-product attention as one op (aten/ops_attention.cc): q (B, H, L, E), k (B, H, S, E),
// v (B, H, S, Ev), an optional bias broadcast to (B, H, L, S) (a bool mask keeps where true, a
// float one is added), a causal mask keeping key j <= query i, and the scale (1/sqrt(E) when
// absent). As PyTorch's math composite computes it, in the opmath type: a row whose every key is
// masked has weights 0 (its output 0, its logsumexp -inf), and a NaN anywhere in a row is NaN.
struct Attention {
  Value q, k, v, bias, scale;  // bias and scale may be absent (empty shape type)
  bool has_bias = false, has_scale = false, causal = false;
};

// Its operands from an op's values: q, k and v at `first`, the bias (if present) after them, and
// the scale (if present) `scale_after` values after the bias (or v, without one).
Attention attention_operands(const Values& v, const Attrs& a, size_t first, size_t scale_after) {
  Attention at;
  at.q = v[first];
  at.k = v[first + 1];
  at.v = v[first + 2];
  size_t next = first + 3;
  at.has_bias = !a.has("attn_bias_absent");
  if (at.has_bias) at.bias = v[next++];
  at.has_scale = !a.has("scale_absent");
  if (at.has_scale) at.scale = v[next + scale_after - 1];
  at.causal = a.i("is_causal") != 0;
  return at;
}

Value attention_scale(FunctionBuilder& b, const Attention& at, ElementType c, const Dims& dims) {
  if (at.has_scale) return splat(b, at.scale, c, dims);
  return full(b, c, dims, 1.0 / std::sqrt(static_cast<double>(dim(at.q, 1))));
}

// The masked, scaled scores (B, H, L, S) in type c: -inf where masked. As PyTorch's composite
// computes them: q and k each scaled by sqrt(|scale|) (q negated for a negative scale) before
// their product, and the masks added (a bool or causal mask as 0 or -inf), so a NaN or +inf score
// stays NaN where it is masked. (Scaling the product instead put a multiply before the softmax's
// subtraction of the row maximum, which XLA's CPU backend contracts into a fused multiply-add in
// one fusion but not in the maximum's: with scores near 1e10 the two disagreed, giving rows of 0.)
Value attention_scores(FunctionBuilder& b, const Attention& at, ElementType c) {
  Value q = convert(b, at.q, c), k = convert(b, at.k, c);
  Value root;  // sqrt(|scale|), a scalar of type c
  if (at.has_scale) {  // the root taken in the scale's own type, as PyTorch takes it in double
    const Value& scale = at.scale;
    Value wide = unary(b, "stablehlo.sqrt", unary(b, "stablehlo.abs", scale));
    Value negative = compare(b, scale, like(b, scale, 0), "LT");
    root = convert(b, wide, c);
    Value signed_root = select(b, negative, unary(b, "stablehlo.negate", wide), wide);
    q = mul(b, q, broadcast_to(b, convert(b, signed_root, c), q.shape.dims));
  } else {
    root = full(b, c, {}, std::sqrt(1.0 / std::sqrt(static_cast<double>(dim(at.q, 1)))));
    q = mul(b, q, broadcast_to(b, root, q.shape.dims));
  }
  k = mul(b, k, broadcast_to(b, root, k.shape.dims));
  Value s = batched_matmul(b, q, matrix_transpose(b, k));
  Dims dims = s.shape.dims;
  Value zero = full(b, c, dims, 0);
  Value masked = full(b, c, dims, -std::numeric_limits<double>::infinity());
  if (at.has_bias) {
    Value bias = broadcast_to(b, at.bias, dims);
    s = add(b, s, bias.shape.type == ElementType::kPred ? select(b, bias, zero, masked)
                                                         : convert(b, bias, c));
  }
  if (at.causal) {
    Value keep = compare(b, iota(b, ElementType::kS64, dims, 3),
                         iota(b, ElementType::kS64, dims, 2), "LE");
    s = add(b, s, select(b, keep, zero, masked));
  }
  return s;
}

// The probabilities exp(s - lse) and the logsumexp (B, H, L) of scores s: 0 and -inf for a row
// masked throughout.
std::pair<Value, Value> attention_weights(FunctionBuilder& b, const Value& s) {
  Dims axes{3};
  const Dims& dims = s.shape.dims;
  Value m = reduce_extreme(b, s, axes, true);  // (B, H, L)
  Value none = compare(b, m, like(b, m, -std::numeric_limits<double>::infinity()), "EQ");
  m = select(b, none, like(b, m, 0), m);
  Value e = unary(b, "stablehlo.exponential", sub(b, s, spread(b, m, dims, axes)));
  Value total = sum_over(b, e, axes);
  Value total_spread = spread(b, total, dims, axes);
  Value p = select(b, compare(b, total_spread, like(b, total_spread, 0), "EQ"), like(b, e, 0),
                   divide(b, e, total_spread));
  return {p, add(b, m, unary(b, "stablehlo.log", total))};
}

// _scaled_dot_product_fused_attention_overrideable -> (output, logsumexp)
Values attention(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Attention at = attention_operands(v, a, 0, 2);  // ..., bias?, dropout_p, scale?
  ElementType t = out_type(a), c = opmath(t);
  auto [p, lse] = attention_weights(b, attention_scores(b, at, c));
  Value out = batched_matmul(b, p, convert(b, at.v, c));
  return Values{convert(b, out, t), convert(b, lse, out_type(a, 1))};
}

// _scaled_dot_product_fused_attention_overrideable_backward(grad_out, query, key, value,
// attn_bias, grad_input_mask, out, logsumexp, ...) -> (grad_query, grad_key, grad_value): with
// P = softmax(S), dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = scale dS K and
// dK = scale dS^T Q.
Values attention_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  // grad_out, q, k, v, bias?, out, logsumexp, dropout_p, scale?
  Attention at = attention_operands(v, a, 1, 4);
  ElementType c = opmath(at.q.shape.type);
  Value grad = convert(b, v[0], c), out = convert(b, v[at.has_bias ? 5 : 4], c);
  auto [p, lse] = attention_weights(b, attention_scores(b, at, c));
  Value q = convert(b, at.q, c), k = convert(b, at.k, c), value = convert(b, at.v, c);
  Value dv = batched_matmul(b, matrix_transpose(b, p), grad);
  Value dp = batched_matmul(b, grad, matrix_transpose(b, value));
  Dims axes{3};
  Value d = sum_over(b, mul(b, grad, out), axes);  // (B, H, L)
  Value ds = mul(b, p, sub(b, dp, spread(b, d, dp.shape.dims, axes)));
  ds = mul(b, ds, attention_scale(b, at, c, ds.shape.dims));
  Value dq = batched_matmul(b, ds, k);
  Value dk = batched_matmul(b, matrix_transpose(b, ds), q);
  return Values{convert(b, dq, at.q.shape.type), convert(b, dk, at.k.shape.type),
                convert(b, dv, at.v.shape.type)};
}

// Weight norm's slices of a tensor of sizes `dims`: the axes of each slice, every one but `dim`.
struct WeightNormSlices {
  Dims axes, dims;
};
WeightNormSlices weight_norm_slices(const Value& v, int64_t dim) {
  int64_t rank = static_cast<int64_t>(v.shape.rank()), kept = normalize_dim(dim, rank);
  WeightNormSlices s;
  for (int64_t d = 0; d < rank; ++d) {
    if (d != kept) s.axes.push_back(d);
  }
  s.dims = v.shape.dims;
  return s;
}

// A per-slice value (g, norms) in the norms' shape: `dim` kept, the others 1.
Value as_slices(FunctionBuilder& b, const Value& x, const WeightNormSlices& s, ElementType c) {
  Dims kept = s.dims;
  for (int64_t d : s.axes) kept[d] = 1;
  return reshape(b, convert(b, x, c), kept);
}

// _weight_norm_interface(v, g, dim) -> (w, norms): each slice's 2-norm over every dimension but
// dim (in the accumulate type, shaped as g), and w = v * (g / norms), as the CPU kernel computes.
Values weight_norm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  WeightNormSlices s = weight_norm_slices(v[0], a.i("dim"));
  Value x = convert(b, v[0], c);
  Value norms = unary(b, "stablehlo.sqrt",
                      keep_dims(b, sum_over(b, mul(b, x, x), s.axes), s.dims, s.axes));
  Value w = mul(b, x, broadcast_to(b, divide(b, as_slices(b, v[1], s, c), norms), s.dims));
  return {convert(b, w, t), convert(b, reshape(b, norms, out_shape(a, 1)), out_type(a, 1))};
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)
//   -> (grad_v, grad_g): with s = sum(grad_w * v) per slice, grad_g = s / norms and
//   grad_v = (g / norms) * grad_w - (g / norms) * grad_g / norms * v.
Values weight_norm_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  WeightNormSlices s = weight_norm_slices(v[1], a.i("dim"));
  Value gw = convert(b, v[0], c), x = convert(b, v[1], c);
  Value g = as_slices(b, v[2], s, c), norms = as_slices(b, v[3], s, c);
  Value grad_g =
      divide(b, keep_dims(b, sum_over(b, mul(b, gw, x), s.axes), s.dims, s.axes), norms);
  Value scale = divide(b, g, norms);
  Value shift = divide(b, mul(b, scale, grad_g), norms);
  Value grad_v = sub(b, mul(b, broadcast_to(b, scale, s.dims), gw),
                      mul(b, broadcast_to(b, shift, s.dims), x));
  return {convert(b, grad_v, t), convert(b, reshape(b, grad_g, out_shape(a, 1)), out_type(a, 1))};
}

void register_nn_rules(Registry& r) {
  r.add("group_norm", group_norm, {"native_group_norm", "native_group_norm.out"});
  r.add("group_norm_backward", group_norm_backward,
        {"native_group_norm_backward", "native_group_norm_backward.out"});
  r.add("batch_norm", batch_norm);
  r.add("batch_norm_backward", batch_norm_backward,
        {"native_batch_norm_backward", "native_batch_norm_backward.out", "batch_norm_backward"});
  r.add("channel_shuffle", channel_shuffle, {"channel_shuffle", "channel_shuffle.out"});
  r.add("dropout_backward", dropout_backward,
        {"native_dropout_backward", "native_dropout_backward.out"});
  r.add("softmax", softmax(false), {"_softmax", "_softmax.out"});
  r.add("log_softmax", softmax(true), {"_log_softmax", "_log_softmax.out"});
  r.add("softmax_backward", softmax_backward(false),
        {"_softmax_backward_data", "_softmax_backward_data.out"});
  r.add("log_softmax_backward", softmax_backward(true),
        {"_log_softmax_backward_data", "_log_softmax_backward_data.out"});
  r.add("layer_norm", layer_norm, {"native_layer_norm", "native_layer_norm.out"});
  r.add("layer_norm_backward", layer_norm_backward,
        {"native_layer_norm_backward", "native_layer_norm_backward.out"});
  r.add("attention", attention);
  r.add("attention_backward", attention_backward);
  r.add("weight_norm", weight_norm, {"_weight_norm_interface", "_weight_norm_interface.out"});
  r.add("weight_norm_backward", weight_norm_backward,
        {"_weight_norm_interface_backward", "_weight_norm_interface_backward.out"});
  r.add("embedding_backward", embedding_backward,
        {"embedding_dense_backward", "embedding_dense_backward.out"});
}

}  // namespace torchtpu::lowering
