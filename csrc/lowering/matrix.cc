#include "lowering/matrix.h"

#include <numeric>
#include <stdexcept>

#include "lowering/registry.h"

namespace torchtpu::lowering {

Dims batch_dims(const Value& x) {
  return Dims(x.shape.dims.begin(), x.shape.dims.end() - 2);
}

int64_t dim(const Value& x, int64_t from_end) {
  return x.shape.dims[x.shape.rank() - from_end];
}

Dims with(Dims dims, std::initializer_list<int64_t> tail) {
  dims.insert(dims.end(), tail);
  return dims;
}

Dims broadcast_batch(const Dims& x, const Dims& y) {
  size_t n = std::max(x.size(), y.size());
  Dims out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = i + x.size() >= n ? x[i + x.size() - n] : 1;
    int64_t c = i + y.size() >= n ? y[i + y.size() - n] : 1;
    if (a != c && a != 1 && c != 1) throw std::invalid_argument("batch dims do not broadcast");
    out[i] = a == 1 ? c : a;
  }
  return out;
}

Value broadcast_leading(FunctionBuilder& b, const Value& x, const Dims& batch, int keep) {
  Dims dims = batch;
  dims.insert(dims.end(), x.shape.dims.end() - keep, x.shape.dims.end());
  return broadcast_to(b, x, dims);
}

Value matrix_transpose(FunctionBuilder& b, const Value& x) {
  Dims perm(x.shape.rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
  return transpose(b, x, perm);
}

Value matrix_adjoint(FunctionBuilder& b, const Value& x) {
  return conjugate(b, matrix_transpose(b, x));
}

Value abs1(FunctionBuilder& b, const Value& x) {
  if (!hlo::is_complex(x.shape.type)) return unary(b, "stablehlo.abs", x);
  auto [re, im] = real_and_imag(b, x);
  return binary(b, "stablehlo.add", unary(b, "stablehlo.abs", re), unary(b, "stablehlo.abs", im));
}

std::pair<Value, Value> first_largest(FunctionBuilder& b, const Value& v, const Value& mask,
                                      bool first_nan) {
  const Dims& dims = v.shape.dims;
  int64_t axis = v.shape.rank() - 1, n = dims.back();
  ElementType t = real_part(v.shape.type);
  Value mag = abs1(b, v), none = full(b, t, dims, -1);
  Value index = iota(b, ElementType::kS64, dims, axis);
  auto first_where = [&](const Value& at) {
    return reduce(b, select(b, at, index, full(b, ElementType::kS64, dims, n)), {axis},
                  constant(b, ElementType::kS64, n), "stablehlo.minimum");
  };
  // The largest magnitude that is not NaN, and its first index.
  Value candidate = select(b, b_and(b, mask, unary(b, "stablehlo.not", is_nan(b, mag))), mag, none);
  Value largest = reduce_extreme(b, candidate, {axis}, true);
  Value where = first_where(compare(b, candidate, leading_to(b, largest, dims), "EQ"));
  // The first masked NaN (first_nan) or the first masked element, where it is NaN.
  Value first = first_where(first_nan ? b_and(b, mask, is_nan(b, mag)) : mask);
  Value on_first = compare(b, index, leading_to(b, first, dims), "EQ");
  Value first_mag = reduce(b, select(b, on_first, mag, full(b, t, dims, 0)), {axis},
                           constant(b, t, 0), "stablehlo.add");
  Value nan_first = is_nan(b, first_mag);
  return {select(b, nan_first, first_mag, maximum(b, largest, full(b, t, largest.shape.dims, 0))),
          select(b, nan_first, first, where)};
}

std::string adjoint_kind(const Value& a) {
  return hlo::is_complex(a.shape.type) ? "ADJOINT" : "TRANSPOSE";
}

Value batched_matmul(FunctionBuilder& b, const Value& x, const Value& y) {
  int64_t r = static_cast<int64_t>(x.shape.rank());
  Dims batch(r - 2);
  std::iota(batch.begin(), batch.end(), 0);
  Dims dims = batch_dims(x);
  dims.push_back(x.shape.dims[r - 2]);
  dims.push_back(y.shape.dims[r - 1]);
  return b.op("stablehlo.dot_general", {x, convert(b, y, x.shape.type)}, Shape{x.shape.type, dims},
              "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
                  FunctionBuilder::i64_list(batch) + ", rhs_batching_dimensions = " +
                  FunctionBuilder::i64_list(batch) + ", lhs_contracting_dimensions = " +
                  FunctionBuilder::i64_list({r - 1}) + ", rhs_contracting_dimensions = " +
                  FunctionBuilder::i64_list({r - 2}) + ">");
}

namespace {

// row - column (+ offset compares) over the last two dims of `dims`.
Value diagonal_offset(FunctionBuilder& b, const Dims& dims) {
  int64_t r = static_cast<int64_t>(dims.size());
  return binary(b, "stablehlo.subtract", iota(b, ElementType::kS64, dims, r - 1),
                iota(b, ElementType::kS64, dims, r - 2));
}

}  // namespace

Value identity(FunctionBuilder& b, ElementType type, const Dims& batch, int64_t n) {
  Dims dims = batch;
  dims.push_back(n);
  dims.push_back(n);
  Value on = compare(b, diagonal_offset(b, dims), full(b, ElementType::kS64, dims, 0), "EQ");
  return convert(b, on, type);
}

Value triangle(FunctionBuilder& b, const Value& x, bool upper, int64_t offset) {
  const Dims& dims = x.shape.dims;
  Value keep = compare(b, diagonal_offset(b, dims),
                       full(b, ElementType::kS64, dims, static_cast<double>(offset)),
                       upper ? "GE" : "LE");
  return select(b, keep, x, full(b, x.shape.type, dims, 0));
}

Value diagonal(FunctionBuilder& b, const Value& x) {
  const Dims& dims = x.shape.dims;
  int64_t r = static_cast<int64_t>(dims.size());
  int64_t m = dims[r - 2], n = dims[r - 1];
  Value on = compare(b, diagonal_offset(b, dims), full(b, ElementType::kS64, dims, 0), "EQ");
  Value d = reduce(b, select(b, on, x, full(b, x.shape.type, dims, 0)), {r - 1},
                   constant(b, x.shape.type, 0), "stablehlo.add");
  if (m <= n) return d;
  Dims start(r - 1, 0), limit = d.shape.dims;
  limit.back() = n;
  return slice(b, d, start, limit);
}

Value triangular_solve(FunctionBuilder& b, const Value& a, const Value& rhs, bool left, bool lower,
                       bool unit_diagonal, const std::string& transpose) {
  Dims batch = broadcast_batch(batch_dims(a), batch_dims(rhs));
  Value aa = broadcast_leading(b, a, batch), bb = broadcast_leading(b, convert(b, rhs, a.shape.type),
                                                                    batch);
  auto flag = [](bool v) { return std::string(v ? "true" : "false"); };
  return b.op("stablehlo.triangular_solve", {aa, bb}, bb.shape,
              "left_side = " + flag(left) + ", lower = " + flag(lower) +
                  ", unit_diagonal = " + flag(unit_diagonal) +
                  ", transpose_a = #stablehlo<transpose " + transpose + ">");
}

Value pick(FunctionBuilder& b, const Value& x, int64_t axis, const Value& j) {
  const Dims& dims = x.shape.dims;
  Value at = compare(b, iota(b, ElementType::kS64, dims, axis),
                     broadcast_in_dim(b, j, dims, {}), "EQ");
  return reduce(b, select(b, at, x, full(b, x.shape.type, dims, 0)), {axis},
                constant(b, x.shape.type, 0), "stablehlo.add");
}

Value leading_to(FunctionBuilder& b, const Value& v, const Dims& dims) {
  Dims at(v.shape.rank());
  std::iota(at.begin(), at.end(), 0);
  return broadcast_in_dim(b, v, dims, at);
}

LoweringRule into_result_types(LoweringRule rule) {
  return [rule](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Values results = rule(b, v, a);
    for (size_t k = 0; k < results.size(); ++k) {
      std::string key = k == 0 ? "type" : "type" + std::to_string(k);
      if (a.has(key)) results[k] = convert(b, results[k], out_type(a, static_cast<int>(k)));
    }
    return results;
  };
}

}  // namespace torchtpu::lowering
