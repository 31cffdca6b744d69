// p-norm distances between rows: _cdist_forward / _cdist_backward (batched, broadcasting batch
// dimensions) and _pdist_forward / _pdist_backward (the upper triangle of one set against
// itself). The order `p` is an attribute: 0 counts differences, inf takes the largest, and
// every other p sums |d|^p. Gradients follow PyTorch's CPU kernels, 0 where a distance is 0.
#include <cmath>
#include <string>

#include "lowering/arith.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// x1 [B, P, M] and x2 [B, R, M] to their differences [B, P, R, M].
Value differences(FunctionBuilder& b, const Value& x1, const Value& x2) {
  int64_t n = x1.shape.dims[0], p = x1.shape.dims[1], r = x2.shape.dims[1];
  int64_t m = x1.shape.dims[2];
  Dims cube{n, p, r, m};
  return sub(b, broadcast_in_dim(b, x1, cube, {0, 1, 3}), broadcast_in_dim(b, x2, cube, {0, 2, 3}));
}

Value sum_last(FunctionBuilder& b, const Value& x) {
  return reduce(b, x, {static_cast<int64_t>(x.shape.rank()) - 1}, constant(b, x.shape.type, 0),
                "stablehlo.add");
}

Value sign(FunctionBuilder& b, const Value& x) {
  return sub(b, convert(b, compare(b, x, like(b, x, 0), "GT"), x.shape.type),
             convert(b, compare(b, x, like(b, x, 0), "LT"), x.shape.type));
}

// The p-norm distances [B, P, R] of the rows of x1 [B, P, M] and x2 [B, R, M].
Value distances(FunctionBuilder& b, const Value& x1, const Value& x2, double p) {
  Value d = unary(b, "stablehlo.abs", differences(b, x1, x2));
  if (p == 0) return sum_last(b, convert(b, compare(b, d, like(b, d, 0), "NE"), d.shape.type));
  if (p == 1) return sum_last(b, d);
  if (p == 2) return unary(b, "stablehlo.sqrt", sum_last(b, mul(b, d, d)));
  if (std::isinf(p)) {
    Value top = reduce_extreme(b, d, {3}, true);  // NaN-propagating; -inf when M = 0
    return maximum(b, top, like(b, top, 0));
  }
  Value s = sum_last(b, binary(b, "stablehlo.power", d, like(b, d, p)));
  return binary(b, "stablehlo.power", s, like(b, s, 1 / p));
}

// Euclidean distances through the expansion |a|^2 + |b|^2 - 2 a.b, as PyTorch's CPU computes
// them for more than 25 rows (clamped at 1e-30 before the root, as it does).
Value euclidean_by_products(FunctionBuilder& b, const Value& x1, const Value& x2) {
  int64_t n = x1.shape.dims[0], p = x1.shape.dims[1], r = x2.shape.dims[1];
  int64_t m = x1.shape.dims[2];
  Dims cube{n, p, r, m};
  Value dot = sum_last(b, mul(b, broadcast_in_dim(b, x1, cube, {0, 1, 3}),
                              broadcast_in_dim(b, x2, cube, {0, 2, 3})));
  Value n1 = broadcast_in_dim(b, sum_last(b, mul(b, x1, x1)), {n, p, r}, {0, 1});
  Value n2 = broadcast_in_dim(b, sum_last(b, mul(b, x2, x2)), {n, p, r}, {0, 2});
  Value sq = add(b, add(b, mul(b, like(b, dot, -2), dot), n1), n2);
  return unary(b, "stablehlo.sqrt", maximum(b, sq, like(b, sq, 1e-30)));
}

// The gradient [B, P, M] of sum(g * dist) with respect to x1, for x1 [B, P, M], x2 [B, R, M],
// g and dist [B, P, R].
Value distances_backward(FunctionBuilder& b, const Value& g, const Value& x1, const Value& x2,
                         const Value& dist, double p) {
  Value diff = differences(b, x1, x2);
  Dims cube = diff.shape.dims;
  Value gd = broadcast_in_dim(b, g, cube, {0, 1, 2});
  Value dd = broadcast_in_dim(b, dist, cube, {0, 1, 2});
  Value zero = like(b, diff, 0);
  Value at_zero = compare(b, dd, zero, "EQ");
  Value term;
  if (p == 0) {
    term = zero;
  } else if (p == 1) {
    term = mul(b, gd, sign(b, diff));
  } else if (p == 2) {
    term = select(b, at_zero, zero, divide(b, mul(b, gd, diff), dd));
  } else if (std::isinf(p)) {
    Value top = convert(b, compare(b, unary(b, "stablehlo.abs", diff), dd, "EQ"), diff.shape.type);
    term = mul(b, mul(b, gd, sign(b, diff)), top);
  } else {
    Value pm1 = like(b, diff, p - 1);
    Value ratio = divide(b, binary(b, "stablehlo.power", unary(b, "stablehlo.abs", diff), pm1),
                         binary(b, "stablehlo.power", dd, pm1));
    term = mul(b, mul(b, sign(b, diff), ratio), gd);
    term = select(b, b_or(b, at_zero, compare(b, diff, zero, "EQ")), zero, term);
  }
  return reduce(b, term, {2}, constant(b, diff.shape.type, 0), "stablehlo.add");
}

// x [..., rows, M] broadcast to batch dimensions `batch` and flattened to [B, rows, M].
Value batched(FunctionBuilder& b, const Value& x, const Dims& batch, ElementType c) {
  Dims dims = batch;
  int64_t n = 1;
  for (int64_t d : batch) n *= d;
  size_t rank = x.shape.rank();
  dims.push_back(x.shape.dims[rank - 2]);
  dims.push_back(x.shape.dims[rank - 1]);
  return reshape(b, broadcast_to(b, convert(b, x, c), dims),
                 {n, x.shape.dims[rank - 2], x.shape.dims[rank - 1]});
}

Dims batch_of(const Dims& out) { return Dims(out.begin(), out.end() - 2); }

// _cdist_forward(x1, x2, p, compute_mode?)
Values cdist(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims out = out_shape(a), batch = batch_of(out);
  Value x1 = batched(b, v[0], batch, c), x2 = batched(b, v[1], batch, c);
  double p = a.f("p");
  int64_t mode = a.has("compute_mode") ? a.i("compute_mode") : 0;
  bool large = x1.shape.dims[1] > 25 || x2.shape.dims[1] > 25;
  bool products = p == 2 && (mode == 1 || (mode == 0 && large));
  Value d = products ? euclidean_by_products(b, x1, x2) : distances(b, x1, x2, p);
  return {convert(b, reshape(b, d, out), t)};
}

// _cdist_backward(grad, x1, x2, p, cdist) -> grad_x1; operands grad, x1, x2, cdist
Values cdist_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims dist_dims = v[3].shape.dims, batch = batch_of(dist_dims);
  Value x1 = batched(b, v[1], batch, c), x2 = batched(b, v[2], batch, c);
  Dims flat{x1.shape.dims[0], dist_dims[dist_dims.size() - 2], dist_dims.back()};
  Value g = reshape(b, convert(b, v[0], c), flat), dist = reshape(b, convert(b, v[3], c), flat);
  Value grad = distances_backward(b, g, x1, x2, dist, a.f("p"));
  Dims full_dims = batch;
  full_dims.push_back(x1.shape.dims[1]);
  full_dims.push_back(x1.shape.dims[2]);
  return {convert(b, sum_to(b, reshape(b, grad, full_dims), out_shape(a)), t)};
}

// The pairs (i, j), i < j, of n rows in pdist's order, as flat indices i * n + j of an [n, n]
// matrix (and j * n + i, `transposed`), [pairs, 1].
Value pair_indices(FunctionBuilder& b, int64_t n, bool transposed) {
  std::string literal;
  int64_t pairs = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = i + 1; j < n; ++j, ++pairs) {
      literal += (literal.empty() ? "" : ", ") + std::to_string(transposed ? j * n + i : i * n + j);
    }
  }
  return reshape(b, b.constant(Shape{ElementType::kS64, {pairs}}, "[" + literal + "]"), {pairs, 1});
}

const char* kFlatDims = "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], "
                        "index_vector_dim = 1";

// _pdist_forward(self, p): the distances of every pair of rows i < j.
Values pdist(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  int64_t n = v[0].shape.dims[0], m = v[0].shape.dims[1];
  int64_t pairs = out_shape(a)[0];
  if (pairs == 0) return {full(b, t, {0}, 0)};
  Value x = reshape(b, convert(b, v[0], c), {1, n, m});
  Value d = reshape(b, distances(b, x, x, a.f("p")), {n * n});
  Value picked = b.op("stablehlo.gather", {d, pair_indices(b, n, false)}, Shape{c, {pairs}},
                      "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], "
                      "start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, "
                      "indices_are_sorted = true");
  return {convert(b, picked, t)};
}

// A pair vector [pairs] spread into a symmetric [n, n] matrix (zero diagonal).
Value symmetric(FunctionBuilder& b, const Value& pairs, int64_t n) {
  std::string dims =
      std::string("scatter_dimension_numbers = #stablehlo.scatter<") + kFlatDims + ">";
  Value upper = scatter(b, full(b, pairs.shape.type, {n * n}, 0), pair_indices(b, n, false), pairs,
                        true, dims);
  Value both = scatter(b, upper, pair_indices(b, n, true), pairs, true, dims);
  return reshape(b, both, {1, n, n});
}

// _pdist_backward(grad, self, p, pdist); operands grad, self, pdist
Values pdist_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  int64_t n = v[1].shape.dims[0], m = v[1].shape.dims[1];
  if (n < 2) return {full(b, t, {n, m}, 0)};
  Value x = reshape(b, convert(b, v[1], c), {1, n, m});
  Value g = symmetric(b, convert(b, v[0], c), n), dist = symmetric(b, convert(b, v[2], c), n);
  Value grad = distances_backward(b, g, x, x, dist, a.f("p"));
  return {convert(b, reshape(b, grad, {n, m}), t)};
}

}  // namespace

void register_distance_rules(Registry& r) {
  r.add("cdist", cdist, {"_cdist_forward", "_cdist_forward.out"});
  r.add("cdist_backward", cdist_backward, {"_cdist_backward", "_cdist_backward.out"});
  r.add("pdist", pdist, {"_pdist_forward", "_pdist_forward.out"});
  r.add("pdist_backward", pdist_backward, {"_pdist_backward", "_pdist_backward.out"});
}

}  // namespace torchtpu::lowering
