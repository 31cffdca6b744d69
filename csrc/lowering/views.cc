// Reading and writing strided views of a storage. A storage is one flat array; a view is
// (sizes, strides, offset) over it, in the reader's element type.
#include <algorithm>
#include <optional>
#include <stdexcept>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

int64_t numel(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// Reinterprets the bytes of a flat array as another element type (PyTorch's Tensor.view(dtype)).
Value retype_flat(FunctionBuilder& b, Value flat, ElementType type) {
  ElementType from = flat.shape.type;
  if (from == type) return flat;
  if (from == ElementType::kPred) return retype_flat(b, convert(b, flat, ElementType::kU8), type);
  if (type == ElementType::kPred) {
    return convert(b, retype_flat(b, flat, ElementType::kU8), ElementType::kPred);
  }
  int64_t n = flat.shape.dims[0];
  // bitcast_convert refuses complex types: go through their (real, imaginary) pairs.
  if (hlo::is_complex(from)) {
    ElementType part = real_part(from);
    Shape pair{part, {n, 1}};
    Value re = reshape(b, b.op("stablehlo.real", {flat}, Shape{part, {n}}), pair.dims);
    Value im = reshape(b, b.op("stablehlo.imag", {flat}, Shape{part, {n}}), pair.dims);
    return retype_flat(b, reshape(b, concatenate(b, {re, im}, 1), {2 * n}), type);
  }
  if (hlo::is_complex(type)) {
    ElementType part = real_part(type);
    Value parts = retype_flat(b, flat, part);
    int64_t m = parts.shape.dims[0] / 2;
    Value pairs = reshape(b, slice(b, parts, {0}, {2 * m}), {m, 2});
    Value re = reshape(b, slice(b, pairs, {0, 0}, {m, 1}), {m});
    Value im = reshape(b, slice(b, pairs, {0, 1}, {m, 2}), {m});
    return make_complex(b, re, im, type);
  }
  size_t wf = hlo::byte_width(from), wt = hlo::byte_width(type);
  if (wf == wt) return b.op("stablehlo.bitcast_convert", {flat}, Shape{type, {n}});
  if (wf > wt) {
    int64_t k = static_cast<int64_t>(wf / wt);
    Value split = b.op("stablehlo.bitcast_convert", {flat}, Shape{type, {n, k}});
    return reshape(b, split, {n * k});
  }
  int64_t k = static_cast<int64_t>(wt / wf);
  Value whole = slice(b, flat, {0}, {n / k * k});
  Value grouped = reshape(b, whole, {n / k, k});
  return b.op("stablehlo.bitcast_convert", {grouped}, Shape{type, {n / k}});
}

// The dimensions of a view that can be read by slicing and reshaping its flat storage: those of
// size > 1 and non-zero stride, sorted by decreasing stride, each nested inside the next larger
// one. Empty optional when the view's elements overlap or interleave (read by a gather instead).
std::optional<std::vector<int>> nested_order(const Dims& sizes, const Dims& strides) {
  std::vector<int> dims;
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] > 1 && strides[k] != 0) dims.push_back(static_cast<int>(k));
  }
  std::stable_sort(dims.begin(), dims.end(),
                   [&](int a, int c) { return strides[a] > strides[c]; });
  for (size_t j = 0; j + 1 < dims.size(); ++j) {
    int64_t outer = strides[dims[j]], inner = strides[dims[j + 1]];
    if (outer % inner != 0 || outer < inner * sizes[dims[j + 1]]) return std::nullopt;
  }
  return dims;
}

// The flat index of each element of the view, as an s64 tensor of the view's shape.
Value element_indices(FunctionBuilder& b, const Dims& sizes, const Dims& strides, int64_t offset) {
  Value index = full(b, ElementType::kS64, sizes, static_cast<double>(offset));
  for (size_t k = 0; k < sizes.size(); ++k) {
    if (sizes[k] <= 1 || strides[k] == 0) continue;
    Value step = binary(b, "stablehlo.multiply", iota(b, ElementType::kS64, sizes, k),
                        full(b, ElementType::kS64, sizes, static_cast<double>(strides[k])));
    index = binary(b, "stablehlo.add", index, step);
  }
  return index;
}

std::string gather_scatter_dims(const std::string& kind, size_t rank) {
  if (kind == "gather") {
    return "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], start_index_map = "
           "[0], index_vector_dim = " + std::to_string(rank) + ">, slice_sizes = array<i64: 1>, "
           "indices_are_sorted = false";
  }
  return "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
         "scatter_dims_to_operand_dims = [0], index_vector_dim = " + std::to_string(rank) + ">";
}

// A nested view's elements as a block of the flat storage: the `span` elements from its offset,
// shaped `blocks` (its dimensions in stride order, then the innermost stride), of which the view
// is the corner `limits`.
struct Blocks {
  int64_t span;
  Dims blocks, limits, kept;  // kept: the view's dimensions in stride order
  std::vector<int> original;  // the view's dimensions of `order`, in their own order
};

Blocks blocks_of(const Dims& sizes, const Dims& strides, const std::vector<int>& order) {
  Blocks g;
  g.span = strides[order[0]] * sizes[order[0]];
  g.blocks = g.limits = g.kept = {sizes[order[0]]};
  for (size_t j = 1; j < order.size(); ++j) {
    g.blocks.push_back(strides[order[j - 1]] / strides[order[j]]);
    g.limits.push_back(sizes[order[j]]);
    g.kept.push_back(sizes[order[j]]);
  }
  g.blocks.push_back(strides[order.back()]);
  g.limits.push_back(1);
  g.original.assign(order.begin(), order.end());
  std::sort(g.original.begin(), g.original.end());
  return g;
}

Value read_nested(FunctionBuilder& b, Value flat, const Dims& sizes, const Dims& strides,
                  int64_t offset, const std::vector<int>& order) {
  if (order.empty()) {
    Value one = reshape(b, slice(b, flat, {offset}, {offset + 1}), {});
    return broadcast_in_dim(b, one, sizes, {});
  }
  Blocks g = blocks_of(sizes, strides, order);
  flat = pad_end(b, flat, std::max<int64_t>(0, offset + g.span - flat.shape.dims[0]));
  Value v = slice(b, flat, {offset}, {offset + g.span});
  v = reshape(b, v, g.blocks);
  v = slice(b, v, Dims(g.blocks.size(), 0), g.limits);
  v = reshape(b, v, g.kept);
  // Back from stride order to the view's own dimension order.
  Dims permutation;
  for (int k : g.original) {
    permutation.push_back(std::find(order.begin(), order.end(), k) - order.begin());
  }
  v = transpose(b, v, permutation);
  if (v.shape.dims == sizes) return v;
  Dims mapping(g.original.begin(), g.original.end());
  return broadcast_in_dim(b, v, sizes, mapping);
}

// Writes `value` through a nested view without a scatter: the value, laid out in stride order
// and padded to the view's block, replaces the block's elements where a mask of the same layout
// is set (everywhere, when the view covers the whole storage).
Value write_nested(FunctionBuilder& b, const Value* base, const Value& value, const Dims& sizes,
                   const Dims& strides, int64_t offset, int64_t n, const std::vector<int>& order) {
  ElementType type = value.shape.type;
  Blocks g = blocks_of(sizes, strides, order);
  Dims own;  // the value without its size-1 dimensions, in its own order
  for (int k : g.original) own.push_back(sizes[k]);
  Dims permutation;
  for (int k : order) {
    permutation.push_back(std::find(g.original.begin(), g.original.end(), k) -
                          g.original.begin());
  }
  Dims in_blocks = g.kept;
  in_blocks.push_back(1);
  Dims high;
  for (size_t j = 0; j < g.blocks.size(); ++j) high.push_back(g.blocks[j] - g.limits[j]);
  auto spread = [&](const Value& v, double fill) {
    Value laid = reshape(b, transpose(b, reshape(b, v, own), permutation), in_blocks);
    return reshape(b, pad_high(b, laid, high, fill), {g.span});
  };
  Value block = spread(value, 0);
  if (offset == 0 && g.span == n && numel(sizes) == n) return block;  // a permutation of it all
  int64_t end = std::max(n, offset + g.span);
  Value whole = pad_end(b, base ? *base : full(b, type, {n}, 0), end - n);
  Value mask = spread(full(b, ElementType::kPred, sizes, 1), 0);
  Value merged = select(b, mask, block, slice(b, whole, {offset}, {offset + g.span}));
  Value start = constant(b, ElementType::kS64, static_cast<double>(offset));
  whole = b.op("stablehlo.dynamic_update_slice", {whole, merged, start}, whole.shape);
  return end == n ? whole : slice(b, whole, {0}, {n});
}

// operands: [flat storage]; attrs: type (the reader's), sizes, strides, offset.
Values view_read(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  const Dims& sizes = attrs.ints("sizes");
  const Dims& strides = attrs.ints("strides");
  int64_t offset = attrs.i("offset");
  Value flat = retype_flat(b, operands[0], attrs.type("type"));
  int64_t n = flat.shape.dims[0];
  if (offset == 0 && numel(sizes) == n && is_dense(sizes, strides)) {
    return {reshape(b, flat, sizes)};
  }
  if (auto order = nested_order(sizes, strides)) {
    return {read_nested(b, flat, sizes, strides, offset, *order)};
  }
  Value index = element_indices(b, sizes, strides, offset);
  return {b.op("stablehlo.gather", {flat, index}, Shape{flat.shape.type, sizes},
               gather_scatter_dims("gather", sizes.size()))};
}

// operands: [flat storage, value] or [value] for a storage with no contents yet (zeros);
// attrs: sizes, strides, offset, numel (of the storage, in the value's element type).
// Returns the new flat storage, in the value's element type.
Values view_write(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  const Value& value = operands.back();
  ElementType type = value.shape.type;
  const Dims& sizes = attrs.ints("sizes");
  const Dims& strides = attrs.ints("strides");
  int64_t offset = attrs.i("offset");
  int64_t n = attrs.i("numel");
  if (value.shape != Shape{attrs.type("type"), sizes}) {
    throw std::logic_error("torchtpu: an op's lowering produced " + value.shape.mlir() +
                           " where PyTorch expects " + Shape{attrs.type("type"), sizes}.mlir());
  }
  bool dense = is_dense(sizes, strides);
  if (offset == 0 && dense && numel(sizes) == n) return {reshape(b, value, {n})};
  std::optional<Value> stored;
  if (operands.size() == 2) stored = retype_flat(b, operands[0], type);
  if (!dense) {
    auto order = nested_order(sizes, strides);
    bool expanded = false;  // a dimension of stride 0 (PyTorch refuses writes through those)
    for (size_t k = 0; k < sizes.size(); ++k) expanded |= sizes[k] > 1 && strides[k] == 0;
    if (order && !order->empty() && !expanded) {
      return {write_nested(b, stored ? &*stored : nullptr, value, sizes, strides, offset, n,
                           *order)};
    }
  }
  Value base = stored ? *stored : full(b, type, {n}, 0);
  if (dense) {
    Value start = constant(b, ElementType::kS64, static_cast<double>(offset));
    return {b.op("stablehlo.dynamic_update_slice", {base, reshape(b, value, {numel(sizes)}), start},
                 base.shape)};
  }
  Value index = element_indices(b, sizes, strides, offset);
  return {scatter(b, base, index, value, false, gather_scatter_dims("scatter", sizes.size()))};
}

// attrs: type, sizes. Contents of a storage never written, and of zero-size views.
Values zeros(FunctionBuilder& b, const Values&, const Attrs& attrs) {
  return {full(b, attrs.type("type"), attrs.ints("sizes"), 0)};
}

// operands: [flat]; attrs: numel. Grows (zero-filled) or shrinks a storage.
Values resize_flat(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  int64_t n = attrs.i("numel"), have = operands[0].shape.dims[0];
  if (n >= have) return {pad_end(b, operands[0], n - have)};
  return {slice(b, operands[0], {0}, {n})};
}

}  // namespace

void register_view_rules(Registry& r) {
  r.add("view_read", view_read);
  r.add("view_write", view_write);
  r.add("zeros", zeros);
  r.add("resize_flat", resize_flat);
}

}  // namespace torchtpu::lowering
