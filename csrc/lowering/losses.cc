// Losses and their gradients: nll (any rank), mse, binary cross-entropy, smooth L1 / Huber, and
// the margin losses. Attribute `reduction` is PyTorch's code (none, mean, sum); class targets are
// compared with an iota (a one-hot mask) rather than gathered, so an ignored or masked-out target
// reads nothing. Out-of-range targets are device-side checks (aten/value_checks.cc).
#include "lowering/arith.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

enum Reduction { kNone = 0, kMean = 1, kSum = 2 };

Value reduce_loss(FunctionBuilder& b, const Value& losses, int64_t reduction) {
  if (reduction == kNone) return losses;
  Value s = sum_all(b, losses);
  if (reduction == kSum) return s;
  return divide(b, s, full(b, losses.shape.type, {}, static_cast<double>(losses.shape.numel())));
}

// The gradient scale of reduction `reduction` over `n` elements, for grad_output `g` (already
// broadcast): g / n for mean, g otherwise.
Value reduction_scale(FunctionBuilder& b, const Value& g, int64_t reduction, int64_t n) {
  return reduction == kMean ? divide(b, g, like(b, g, static_cast<double>(n))) : g;
}

// The broadcast shape of two operands.
Dims broadcast_shape(const Dims& x, const Dims& y) {
  Dims out(std::max(x.size(), y.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t dx = i < x.size() ? x[x.size() - 1 - i] : 1;
    int64_t dy = i < y.size() ? y[y.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = dx == 1 ? dy : dx;
  }
  return out;
}

// A class-scores tensor as rows [n, classes]: () and (C) are one row, (N, C, d1, ...) moves the
// classes last. `from_rows` undoes it.
Value to_rows(FunctionBuilder& b, const Value& x) {
  size_t rank = x.shape.rank();
  if (rank <= 1) return reshape(b, x, {1, x.shape.numel()});
  if (rank == 2) return x;
  Dims perm{0};
  for (size_t d = 2; d < rank; ++d) perm.push_back(static_cast<int64_t>(d));
  perm.push_back(1);
  Value t = transpose(b, x, perm);
  int64_t classes = x.shape.dims[1];
  return reshape(b, t, {x.shape.numel() / std::max<int64_t>(classes, 1), classes});
}

Value from_rows(FunctionBuilder& b, const Value& rows, const Dims& shape) {
  size_t rank = shape.size();
  if (rank <= 2) return reshape(b, rows, shape);
  Dims moved{shape[0]};
  for (size_t d = 2; d < rank; ++d) moved.push_back(shape[d]);
  moved.push_back(shape[1]);
  Dims perm{0, static_cast<int64_t>(rank) - 1};
  for (size_t d = 1; d + 1 < rank; ++d) perm.push_back(static_cast<int64_t>(d));
  return transpose(b, reshape(b, rows, moved), perm);
}

// Row i's value at column target[i] (a one-hot select and sum), [n].
Value pick(FunctionBuilder& b, const Value& onehot, const Value& rows) {
  return reduce(b, select(b, onehot, rows, like(b, rows, 0)), {1}, constant(b, rows.shape.type, 0),
                "stablehlo.add");
}

// target [n] against the columns of [n, classes].
Value one_hot(FunctionBuilder& b, const Value& target, int64_t n, int64_t classes) {
  return compare(b, iota(b, ElementType::kS64, {n, classes}, 1),
                 broadcast_in_dim(b, target, {n, classes}, {0}), "EQ");
}

// The samples nll counts, [n]: those whose target is not ignore_index. The CPU skips the others,
// so they stay exactly 0 in the loss and the gradient, whatever their scores (inf, NaN) and
// however the total weight came out (0 when every target is ignored).
Value nll_counted(FunctionBuilder& b, const Value& target, int64_t ignore_index) {
  return compare(b, target,
                 full(b, ElementType::kS64, target.shape.dims, static_cast<double>(ignore_index)),
                 "NE");
}

// Per-sample weights of nll: 0 where the target is ignored, the class weight otherwise.
Value nll_weights(FunctionBuilder& b, const Value& counted, const Value& onehot,
                  const Value* weight, ElementType c) {
  int64_t n = counted.shape.dims[0], classes = onehot.shape.dims[1];
  Value w = convert(b, counted, c);
  if (weight == nullptr) return w;
  return mul(b, w, pick(b, onehot, broadcast_in_dim(b, convert(b, *weight, c), {n, classes}, {1})));
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight?, reduction, ignore_index)
//   -> (output, total_weight)
Values nll_loss(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = to_rows(b, convert(b, v[0], c));
  int64_t n = x.shape.dims[0], classes = x.shape.dims[1];
  Value target = reshape(b, convert(b, v[1], ElementType::kS64), {n});
  Value onehot = one_hot(b, target, n, classes);
  bool has_weight = !a.has("weight_absent");
  Value counted = nll_counted(b, target, a.i("ignore_index"));
  Value w = nll_weights(b, counted, onehot, has_weight ? &v[2] : nullptr, c);
  Value losses = select(b, counted, unary(b, "stablehlo.negate", mul(b, pick(b, onehot, x), w)),
                        full(b, c, {n}, 0));
  Value total = sum_all(b, w);
  int64_t reduction = a.i("reduction");
  Value out = losses;
  if (reduction != kNone) {
    Value s = sum_all(b, losses);
    out = reduction == kSum ? s : divide(b, s, total);
  }
  return {convert(b, reshape(b, out, out_shape(a)), t),
          convert(b, reshape(b, total, out_shape(a, 1)), out_type(a, 1))};
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight?, reduction,
// ignore_index, total_weight)
Values nll_loss_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = out_shape(a);
  int64_t classes = shape.size() == 1 ? shape[0] : shape[1];
  int64_t n = classes == 0 ? 0 : v[1].shape.numel() / classes;
  Value g = convert(b, v[0], c);
  Value target = reshape(b, convert(b, v[2], ElementType::kS64), {n});
  bool has_weight = !a.has("weight_absent");
  Value total = convert(b, v[has_weight ? 4 : 3], c);
  Value onehot = one_hot(b, target, n, classes);
  Value counted = nll_counted(b, target, a.i("ignore_index"));
  Value w = nll_weights(b, counted, onehot, has_weight ? &v[3] : nullptr, c);
  int64_t reduction = a.i("reduction");
  Value scale;  // per-sample gradient scale, [n]
  if (reduction == kNone) {
    scale = mul(b, reshape(b, g, {n}), w);
  } else {
    scale = mul(b, broadcast_in_dim(b, reshape(b, g, {}), {n}, {}), w);
    if (reduction == kMean) {
      scale = divide(b, scale, broadcast_in_dim(b, reshape(b, total, {}), {n}, {}));
    }
  }
  Value written =
      binary(b, "stablehlo.and", onehot, broadcast_in_dim(b, counted, {n, classes}, {0}));
  Value grad = select(b, written,
                      broadcast_in_dim(b, unary(b, "stablehlo.negate", scale), {n, classes}, {0}),
                      full(b, c, {n, classes}, 0));
  return {convert(b, from_rows(b, grad, shape), t)};
}

// mse_loss(self, target, reduction)
Values mse_loss(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = broadcast_shape(v[0].shape.dims, v[1].shape.dims);
  Value d = sub(b, promote(b, v[0], c, shape), promote(b, v[1], c, shape));
  return {convert(b, reshape(b, reduce_loss(b, mul(b, d, d), a.i("reduction")), out_shape(a)), t)};
}

// mse_loss_backward(grad_output, self, target, reduction)
Values mse_loss_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = out_shape(a);
  Value d = sub(b, promote(b, v[1], c, shape), promote(b, v[2], c, shape));
  Value g = reduction_scale(b, promote(b, v[0], c, shape), a.i("reduction"), v[1].shape.numel());
  return {convert(b, mul(b, mul(b, like(b, d, 2), d), g), t)};
}

// binary_cross_entropy(self, target, weight?, reduction), as PyTorch: each log clamped at -100.
Values binary_cross_entropy(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = v[0].shape.dims;
  Value x = convert(b, v[0], c), y = promote(b, v[1], c, shape);
  Value floor = like(b, x, -100);
  Value log_x = maximum(b, unary(b, "stablehlo.log", x), floor);
  Value log_1mx = maximum(b, unary(b, "stablehlo.log_plus_one", unary(b, "stablehlo.negate", x)),
                          floor);
  Value loss = sub(b, mul(b, sub(b, y, like(b, y, 1)), log_1mx), mul(b, y, log_x));
  if (!a.has("weight_absent")) loss = mul(b, loss, promote(b, v[2], c, shape));
  return {convert(b, reshape(b, reduce_loss(b, loss, a.i("reduction")), out_shape(a)), t)};
}

// binary_cross_entropy_backward(grad_output, self, target, weight?, reduction)
Values binary_cross_entropy_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = out_shape(a);
  Value g = reduction_scale(b, promote(b, v[0], c, shape), a.i("reduction"), v[1].shape.numel());
  Value x = promote(b, v[1], c, shape), y = promote(b, v[2], c, shape);
  Value denom = maximum(b, mul(b, sub(b, like(b, x, 1), x), x), like(b, x, 1e-12));
  Value grad = divide(b, mul(b, g, sub(b, x, y)), denom);
  if (!a.has("weight_absent")) grad = mul(b, grad, promote(b, v[3], c, shape));
  return {convert(b, grad, t)};
}

// smooth_l1_loss (huber = false: operands self, target, beta) and huber_loss (self, target,
// delta): quadratic below the threshold, linear above.
LoweringRule smooth_loss(bool huber) {
  return [huber](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    Dims shape = broadcast_shape(v[0].shape.dims, v[1].shape.dims);
    Value z = unary(b, "stablehlo.abs", sub(b, promote(b, v[0], c, shape),
                                             promote(b, v[1], c, shape)));
    Value k = promote(b, v[2], c, shape), half = like(b, z, 0.5);
    Value quadratic = mul(b, mul(b, half, z), z);
    Value linear;
    if (huber) {
      linear = mul(b, k, sub(b, z, mul(b, half, k)));
    } else {
      quadratic = divide(b, quadratic, k);
      linear = sub(b, z, mul(b, half, k));
    }
    Value loss = select(b, compare(b, z, k, "LT"), quadratic, linear);
    return Values{convert(b, reshape(b, reduce_loss(b, loss, a.i("reduction")), out_shape(a)), t)};
  };
}

// smooth_l1_loss_backward / huber_loss_backward(grad_output, self, target, reduction, beta|delta)
LoweringRule smooth_loss_backward(bool huber) {
  return [huber](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    Dims shape = out_shape(a);
    Value g = reduction_scale(b, promote(b, v[0], c, shape), a.i("reduction"), v[1].shape.numel());
    Value d = sub(b, promote(b, v[1], c, shape), promote(b, v[2], c, shape));
    Value k = promote(b, v[3], c, shape);
    Value edge = huber ? mul(b, g, k) : g;
    Value inner = huber ? mul(b, d, g) : divide(b, mul(b, d, g), k);
    Value grad = select(b, compare(b, d, unary(b, "stablehlo.negate", k), huber ? "LT" : "LE"),
                        unary(b, "stablehlo.negate", edge),
                        select(b, compare(b, d, k, huber ? "GT" : "GE"), edge, inner));
    return Values{convert(b, grad, t)};
  };
}

// The terms of multi_margin_loss for rows x [n, C] and targets [n]: for every j but the target,
// max(0, margin - x[target] + x[j]) (squared when p = 2), times the target's class weight.
struct MarginTerms {
  Value onehot, z, active, w;  // [n, C]; w is the per-sample weight broadcast, or empty
};
MarginTerms margin_terms(FunctionBuilder& b, const Values& v, size_t first, const Attrs& a,
                         ElementType c) {
  Value x = to_rows(b, convert(b, v[first], c));
  int64_t n = x.shape.dims[0], classes = x.shape.dims[1];
  Value target = reshape(b, convert(b, v[first + 1], ElementType::kS64), {n});
  Value onehot = one_hot(b, target, n, classes);
  Value margin = splat(b, v[first + 2], c, {n, classes});
  Value xt = broadcast_in_dim(b, pick(b, onehot, x), {n, classes}, {0});
  Value z = add(b, sub(b, margin, xt), x);
  Value active = b_and(b, compare(b, z, like(b, z, 0), "GT"), unary(b, "stablehlo.not", onehot));
  Value w;
  if (!a.has("weight_absent")) {
    Value cw = broadcast_in_dim(b, convert(b, v[first + 3], c), {n, classes}, {1});
    w = broadcast_in_dim(b, pick(b, onehot, cw), {n, classes}, {0});
  }
  return {onehot, z, active, w};
}

// multi_margin_loss(self, target, p, margin, weight?, reduction); p (1 or 2) is an attribute.
Values multi_margin_loss(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  MarginTerms m = margin_terms(b, v, 0, a, c);
  int64_t classes = m.z.shape.dims[1];
  Value h = a.f("p") == 2 ? mul(b, m.z, m.z) : m.z;
  if (m.w.name.size()) h = mul(b, h, m.w);
  h = select(b, m.active, h, like(b, h, 0));
  Value per = divide(b, reduce(b, h, {1}, constant(b, c, 0), "stablehlo.add"),
                     full(b, c, {m.z.shape.dims[0]}, static_cast<double>(classes)));
  return {convert(b, reshape(b, reduce_loss(b, per, a.i("reduction")), out_shape(a)), t)};
}

// The gradient scale of a per-row loss: grad_output [n] for none, else the 0-d one (/ n for
// mean), broadcast to [n, C].
Value row_scale(FunctionBuilder& b, const Value& grad_output, int64_t reduction, int64_t n,
                int64_t classes, ElementType c) {
  Value g = convert(b, grad_output, c);
  if (reduction == kNone) return broadcast_in_dim(b, reshape(b, g, {n}), {n, classes}, {0});
  g = broadcast_in_dim(b, reshape(b, g, {}), {n, classes}, {});
  return reduction_scale(b, g, reduction, n);
}

// multi_margin_loss_backward(grad_output, self, target, p, margin, weight?, reduction)
Values multi_margin_loss_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  MarginTerms m = margin_terms(b, v, 1, a, c);
  int64_t n = m.z.shape.dims[0], classes = m.z.shape.dims[1];
  Value d = a.f("p") == 2 ? mul(b, like(b, m.z, 2), m.z) : like(b, m.z, 1);
  if (m.w.name.size()) d = mul(b, d, m.w);
  Value scale = divide(b, row_scale(b, v[0], a.i("reduction"), n, classes, c),
                       like(b, m.z, static_cast<double>(classes)));
  Value gj = select(b, m.active, mul(b, d, scale), like(b, d, 0));
  Value gt = broadcast_in_dim(b, reduce(b, gj, {1}, constant(b, c, 0), "stablehlo.add"),
                              {n, classes}, {0});
  Value grad = select(b, m.onehot, unary(b, "stablehlo.negate", gt), gj);
  return {convert(b, reshape(b, grad, out_shape(a)), t)};
}

// The terms of multilabel_margin_loss for rows x [n, C] and targets [n, C] (class indices, up
// to the first -1): mask [n, k, j] of the hinge terms max(0, 1 - x[target[k]] + x[j]) that count
// (target k before the first -1, j not a target, the hinge positive), their values, the one-hot
// of target k [n, k, j], and is_target [n, C].
struct LabelTerms {
  Value mask, z, onehot, is_target;
};
LabelTerms label_terms(FunctionBuilder& b, const Value& x_in, const Value& target_in,
                       ElementType c) {
  Value x = to_rows(b, convert(b, x_in, c));
  int64_t n = x.shape.dims[0], classes = x.shape.dims[1];
  Dims cube{n, classes, classes};
  Value target = reshape(b, convert(b, target_in, ElementType::kS64), {n, classes});
  Value ends = convert(b, compare(b, target, full(b, ElementType::kS64, {n, classes}, -1), "EQ"),
                       ElementType::kS64);
  Value valid = compare(b, prefix_sum(b, ends, 1), full(b, ElementType::kS64, {n, classes}, 0),
                        "EQ");
  Value onehot = b_and(b, compare(b, broadcast_in_dim(b, target, cube, {0, 1}),
                                  iota(b, ElementType::kS64, cube, 2), "EQ"),
                       broadcast_in_dim(b, valid, cube, {0, 1}));
  Value is_target = reduce(b, onehot, {1}, constant(b, ElementType::kPred, 0), "stablehlo.or");
  Value xj = broadcast_in_dim(b, x, cube, {0, 2});
  Value xt = reduce(b, select(b, onehot, xj, like(b, xj, 0)), {2}, constant(b, c, 0),
                    "stablehlo.add");
  Value z = add(b, sub(b, full(b, c, cube, 1), broadcast_in_dim(b, xt, cube, {0, 1})), xj);
  Value counts = b_and(b, broadcast_in_dim(b, valid, cube, {0, 1}),
                       unary(b, "stablehlo.not", broadcast_in_dim(b, is_target, cube, {0, 2})));
  Value mask = b_and(b, counts, compare(b, z, like(b, z, 0), "GT"));
  return {mask, z, onehot, is_target};
}

// multilabel_margin_loss_forward(self, target, reduction) -> (output, is_target)
Values multilabel_margin_loss(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  LabelTerms m = label_terms(b, v[0], v[1], c);
  int64_t n = m.z.shape.dims[0], classes = m.z.shape.dims[1];
  Value terms = select(b, m.mask, m.z, like(b, m.z, 0));
  Value per = divide(b, reduce(b, terms, {1, 2}, constant(b, c, 0), "stablehlo.add"),
                     full(b, c, {n}, static_cast<double>(classes)));
  return {convert(b, reshape(b, reduce_loss(b, per, a.i("reduction")), out_shape(a)), t),
          convert(b, reshape(b, m.is_target, out_shape(a, 1)), out_type(a, 1))};
}

// multilabel_margin_loss_backward(grad_output, self, target, reduction, is_target)
Values multilabel_margin_loss_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  LabelTerms m = label_terms(b, v[1], v[2], c);
  int64_t n = m.z.shape.dims[0], classes = m.z.shape.dims[1];
  Value ones = convert(b, m.mask, c);  // [n, k, j]
  Value per_j = reduce(b, ones, {1}, constant(b, c, 0), "stablehlo.add");  // [n, j]
  Value per_k = reduce(b, ones, {2}, constant(b, c, 0), "stablehlo.add");  // [n, k]
  Dims cube{n, classes, classes};
  Value spread = select(b, m.onehot, broadcast_in_dim(b, per_k, cube, {0, 1}), full(b, c, cube, 0));
  Value per_target = reduce(b, spread, {1}, constant(b, c, 0), "stablehlo.add");  // [n, class]
  Value scale = divide(b, row_scale(b, v[0], a.i("reduction"), n, classes, c),
                       full(b, c, {n, classes}, static_cast<double>(classes)));
  Value grad = mul(b, sub(b, per_j, per_target), scale);
  return {convert(b, reshape(b, grad, out_shape(a)), t)};
}

}  // namespace

void register_loss_rules(Registry& r) {
  r.add("nll_loss", nll_loss, {"nll_loss_forward", "nll_loss_forward.output",
                               "nll_loss2d_forward", "nll_loss2d_forward.output"});
  r.add("nll_loss_backward", nll_loss_backward,
        {"nll_loss_backward", "nll_loss_backward.grad_input", "nll_loss2d_backward",
         "nll_loss2d_backward.grad_input"});
  r.add("mse_loss", mse_loss, {"mse_loss", "mse_loss.out"});
  r.add("mse_loss_backward", mse_loss_backward,
        {"mse_loss_backward", "mse_loss_backward.grad_input"});
  r.add("binary_cross_entropy", binary_cross_entropy, all("binary_cross_entropy"));
  r.add("binary_cross_entropy_backward", binary_cross_entropy_backward,
        all("binary_cross_entropy_backward"));
  r.add("smooth_l1_loss", smooth_loss(false), all("smooth_l1_loss"));
  r.add("smooth_l1_loss_backward", smooth_loss_backward(false), all("smooth_l1_loss_backward"));
  r.add("huber_loss", smooth_loss(true), all("huber_loss"));
  r.add("huber_loss_backward", smooth_loss_backward(true), all("huber_loss_backward"));
  r.add("multi_margin_loss", multi_margin_loss, all("multi_margin_loss"));
  r.add("multi_margin_loss_backward", multi_margin_loss_backward,
        all("multi_margin_loss_backward"));
  r.add("multilabel_margin_loss", multilabel_margin_loss, all("multilabel_margin_loss_forward"));
  r.add("multilabel_margin_loss_backward", multilabel_margin_loss_backward,
        all("multilabel_margin_loss_backward"));
}

}  // namespace torchtpu::lowering
