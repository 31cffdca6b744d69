#include "lowering/resample.h"

#include <algorithm>

namespace torchtpu::lowering {

Value constant_vector(FunctionBuilder& b, ElementType type, const std::vector<double>& values) {
  std::string literal = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    literal += (i ? ", " : "") + FunctionBuilder::scalar_literal(type, values[i]);
  }
  return b.constant(Shape{type, {static_cast<int64_t>(values.size())}}, literal + "]");
}

Value take(FunctionBuilder& b, const Value& x, int64_t dim, const std::vector<int64_t>& index) {
  Dims out = x.shape.dims;
  out[dim] = static_cast<int64_t>(index.size());
  if (x.shape.numel() == 0 || index.empty()) return full(b, x.shape.type, out, 0);
  std::vector<double> as_double(index.begin(), index.end());
  Value idx = reshape(b, constant_vector(b, ElementType::kS64, as_double),
                      {static_cast<int64_t>(index.size()), 1});
  Dims offset, slice_sizes = x.shape.dims;
  slice_sizes[dim] = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.rank()); ++d) {
    if (d != dim) offset.push_back(d);
  }
  return b.op(
      "stablehlo.gather", {x, idx}, Shape{x.shape.type, out},
      "dimension_numbers = #stablehlo.gather<offset_dims = " + FunctionBuilder::i64_list(offset) +
          ", collapsed_slice_dims = " + FunctionBuilder::i64_list({dim}) +
          ", start_index_map = " + FunctionBuilder::i64_list({dim}) +
          ", index_vector_dim = 1>, slice_sizes = " + FunctionBuilder::i64_array(slice_sizes) +
          ", indices_are_sorted = false");
}

Value resample(FunctionBuilder& b, const Value& x, int64_t dim, const Taps& taps) {
  ElementType t = x.shape.type;
  Value acc;
  for (int64_t k = 0; k < taps.width; ++k) {
    std::vector<int64_t> index;
    std::vector<double> weight, valid;
    bool all_valid = true;
    for (int64_t o = 0; o < taps.out_size; ++o) {
      int64_t i = taps.index[o * taps.width + k];
      index.push_back(std::max<int64_t>(i, 0));
      weight.push_back(taps.weight[o * taps.width + k]);
      valid.push_back(i >= 0);
      all_valid = all_valid && i >= 0;
    }
    Value term = take(b, x, dim, index);
    const Dims& dims = term.shape.dims;
    if (!taps.unit && term.shape.numel() > 0) {
      term = binary(b, "stablehlo.multiply", term,
                    broadcast_in_dim(b, constant_vector(b, t, weight), dims, {dim}));
    }
    if (!all_valid && term.shape.numel() > 0) {
      Value mask = broadcast_in_dim(b, constant_vector(b, ElementType::kPred, valid), dims, {dim});
      term = select(b, mask, term, full(b, t, dims, 0));
    }
    acc = k == 0 ? term : binary(b, "stablehlo.add", acc, term);
  }
  return acc;
}

Value resample_transpose(FunctionBuilder& b, const Value& g, int64_t dim, const Taps& taps) {
  ElementType t = g.shape.type;
  Dims in = g.shape.dims;
  in[dim] = taps.in_size;
  if (g.shape.numel() == 0 || taps.in_size == 0) return full(b, t, in, 0);
  Dims square{taps.out_size, taps.in_size};
  Value position = iota(b, ElementType::kS64, square, 1);
  Value matrix = full(b, t, square, 0);
  for (int64_t k = 0; k < taps.width; ++k) {
    std::vector<double> index, weight;
    for (int64_t o = 0; o < taps.out_size; ++o) {
      index.push_back(static_cast<double>(taps.index[o * taps.width + k]));
      weight.push_back(taps.weight[o * taps.width + k]);
    }
    Value hit = compare(
        b, position, broadcast_in_dim(b, constant_vector(b, ElementType::kS64, index), square, {0}),
        "EQ");
    Value w = broadcast_in_dim(b, constant_vector(b, t, weight), square, {0});
    matrix = binary(b, "stablehlo.add", matrix, select(b, hit, w, full(b, t, square, 0)));
  }
  Dims product;
  for (size_t d = 0; d < g.shape.rank(); ++d) {
    if (static_cast<int64_t>(d) != dim) product.push_back(g.shape.dims[d]);
  }
  product.push_back(taps.in_size);
  Value r = b.op("stablehlo.dot_general", {g, matrix}, Shape{t, product},
                 "dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = " +
                     FunctionBuilder::i64_list({dim}) + ", rhs_contracting_dimensions = [0]>");
  // The new dimension came last: move it back to `dim`.
  Dims perm;
  int64_t rank = static_cast<int64_t>(g.shape.rank());
  for (int64_t d = 0, src = 0; d < rank; ++d) perm.push_back(d == dim ? rank - 1 : src++);
  return transpose(b, r, perm);
}

}  // namespace torchtpu::lowering
