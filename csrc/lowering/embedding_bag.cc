// embedding_bag (sum, mean, max over bags given by offsets, per_sample_weights, padding_idx,
// include_last_offset) and its gradients. Rows are gathered and reduced per bag with scatters;
// out-of-range indices raise through the device-side index check (aten/value_checks.cc).
#include "lowering/registry.h"
#include "lowering/resample.h"

namespace torchtpu::lowering {
namespace {

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

const ElementType kIndex = ElementType::kS64;

Value column(FunctionBuilder& b, const Value& v, int64_t d) {
  return broadcast_in_dim(b, v, {v.shape.dims[0], d}, {0});
}

// Whether each index counts: not padding_idx (-1: none).
Value counted(FunctionBuilder& b, const Value& index, int64_t padding_idx) {
  Dims dims = index.shape.dims;
  if (padding_idx < 0) return full(b, ElementType::kPred, dims, 1);
  return compare(b, index, full(b, kIndex, dims, static_cast<double>(padding_idx)), "NE");
}

// The bag of each index: how many of the bags' offsets are at or before it, less one.
Value bag_of(FunctionBuilder& b, const Value& offsets, int64_t n, int64_t bags) {
  Value first = slice(b, convert(b, offsets, kIndex), {0}, {bags});
  Dims square{n, bags};
  Value at_or_before =
      compare(b, broadcast_in_dim(b, first, square, {1}), iota(b, kIndex, square, 0), "LE");
  Value count =
      reduce(b, convert(b, at_or_before, kIndex), {1}, constant(b, kIndex, 0), "stablehlo.add");
  Value bag = binary(b, "stablehlo.subtract", count, full(b, kIndex, {n}, 1));
  return minimum(b, maximum(b, bag, full(b, kIndex, {n}, 0)),
                 full(b, kIndex, {n}, static_cast<double>(bags - 1)));
}

// A result of meta shape `dims` from `v` (rank 1): `v` itself, or zeros where the meta function
// gives another size.
Value as_shape(FunctionBuilder& b, const Value& v, const Dims& dims, ElementType t) {
  if (v.shape.dims == dims) return convert(b, v, t);
  if (dims.size() == 1 && v.shape.rank() == 1 && dims[0] > v.shape.dims[0]) {
    return convert(b, pad_high(b, v, {dims[0] - v.shape.dims[0]}), t);
  }
  return full(b, t, dims, 0);
}

// _embedding_bag / _embedding_bag_forward_only(weight, indices, offsets, scale_grad_by_freq,
// mode, sparse, per_sample_weights, include_last_offset, padding_idx)
//   -> (output, offset2bag, bag_size, max_indices)
Values embedding_bag(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value weight = convert(b, v[0], c), index = convert(b, v[1], kIndex);
  int64_t n = index.shape.numel(), d = weight.shape.dims[1];
  int64_t bags = out_shape(a)[0], mode = a.i("mode"), padding_idx = a.i("padding_idx");
  Dims out{bags, d};
  if (n == 0 || bags == 0) {
    Value bag_size = full(b, kIndex, {bags}, 0);
    return {full(b, t, out, 0), full(b, out_type(a, 1), out_shape(a, 1), 0),
            as_shape(b, bag_size, out_shape(a, 2), out_type(a, 2)),
            full(b, out_type(a, 3), out_shape(a, 3), mode == kMax ? -1 : 0)};
  }
  index = reshape(b, index, {n});
  Value bag = bag_of(b, v[2], n, bags);
  Value keep = counted(b, index, padding_idx);
  Value safe = select(b, keep, index, full(b, kIndex, {n}, 0));
  Value picked = gather_rows(b, weight, safe);
  if (!a.has("per_sample_weights_absent")) {
    picked = binary(b, "stablehlo.multiply", picked, column(b, convert(b, v[3], c), d));
  }
  Value keep_rows = column(b, keep, d);
  Value bag_size = scatter_rows(b, full(b, kIndex, {bags, 1}, 0), bag,
                                reshape(b, convert(b, keep, kIndex), {n, 1}), "stablehlo.add");
  bag_size = reshape(b, bag_size, {bags});
  Value nonempty = column(b, compare(b, bag_size, full(b, kIndex, {bags}, 0), "GT"), d);
  Value result, max_indices;
  if (mode == kMax) {
    Value masked = select(b, keep_rows, picked, broadcast_to(b, extreme(b, c, false), {n, d}));
    Value top = scatter_rows(b, broadcast_to(b, extreme(b, c, false), out), bag, masked, "max");
    // The first index of each bag holding the maximum, as CPU's scan picks it.
    Value hit = b_and(b, keep_rows, compare(b, masked, gather_rows(b, top, bag), "EQ"));
    Value position = select(b, hit, iota(b, kIndex, {n, d}, 0), full(b, kIndex, {n, d}, n));
    Value first = scatter_rows(b, full(b, kIndex, out, n), bag, position, "min");
    Value clamped = minimum(b, first, full(b, kIndex, out, n - 1));
    Value chosen =
        b.op("stablehlo.gather", {index, reshape(b, clamped, {bags, d, 1})}, Shape{kIndex, out},
             "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], "
             "start_index_map = [0], index_vector_dim = 2>, slice_sizes = "
             "array<i64: 1>, indices_are_sorted = false");
    max_indices = select(b, nonempty, chosen, full(b, kIndex, out, -1));
    result = select(b, nonempty, top, full(b, c, out, 0));
  } else {
    Value masked = select(b, keep_rows, picked, full(b, c, {n, d}, 0));
    result = scatter_rows(b, full(b, c, out, 0), bag, masked, "stablehlo.add");
    if (mode == kMean) {
      Value size = column(b, convert(b, bag_size, c), d);
      result = select(b, nonempty, binary(b, "stablehlo.divide", result, size), full(b, c, out, 0));
    }
  }
  return {convert(b, result, t), as_shape(b, bag, out_shape(a, 1), out_type(a, 1)),
          as_shape(b, bag_size, out_shape(a, 2), out_type(a, 2)),
          mode == kMax && out_shape(a, 3) == out ? convert(b, max_indices, out_type(a, 3))
                                                 : full(b, out_type(a, 3), out_shape(a, 3), 0)};
}

// _embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices,
// num_weights, scale_grad_by_freq, mode, per_sample_weights, padding_idx) -> [num_weights, D]
// _embedding_bag_backward has offsets after indices, and `sparse`.
Values embedding_bag_backward(FunctionBuilder& b, const Values& operands, const Attrs& a) {
  Values v = operands;
  if (a.has("sparse")) {
    if (a.i("sparse") != 0) throw Unsupported("torchtpu: sparse embedding_bag gradients");
    v.erase(v.begin() + 2);
  }
  ElementType t = out_type(a), c = opmath(t);
  Value grad = convert(b, v[0], c), index = convert(b, v[1], kIndex);
  Dims result = out_shape(a);
  int64_t n = index.shape.numel(), d = result[1], mode = a.i("mode");
  int64_t padding_idx = a.i("padding_idx");
  if (n == 0 || grad.shape.numel() == 0) return {full(b, t, result, 0)};
  index = reshape(b, index, {n});
  Value zeros = full(b, c, result, 0);
  if (mode == kMax) {
    int64_t bags = grad.shape.dims[0];
    Value chosen = convert(b, v[4], kIndex);
    Value used = compare(b, chosen, full(b, kIndex, {bags, d}, 0), "GE");
    Value coords =
        concatenate(b,
                    {reshape(b, maximum(b, chosen, full(b, kIndex, {bags, d}, 0)), {bags, d, 1}),
                     reshape(b, iota(b, kIndex, {bags, d}, 1), {bags, d, 1})},
                    2);
    Value share = select(b, used, grad, full(b, c, {bags, d}, 0));
    return {convert(b,
                    scatter(b, zeros, coords, share, true,
                            "scatter_dimension_numbers = #stablehlo.scatter<"
                            "inserted_window_dims = [0, 1], scatter_dims_to_operand_dims = "
                            "[0, 1], index_vector_dim = 2>"),
                    t)};
  }
  Value bag = convert(b, v[2], kIndex);
  Value share = gather_rows(b, grad, bag);
  if (mode == kMean) {
    int64_t bags = v[3].shape.numel();
    Value sizes = reshape(b, convert(b, v[3], c), {bags, 1});
    Value size = reshape(b, gather_rows(b, sizes, bag), {n});
    share = binary(b, "stablehlo.divide", share, column(b, size, d));
  }
  if (!a.has("per_sample_weights_absent")) {
    share = binary(b, "stablehlo.multiply", share, column(b, convert(b, v[5], c), d));
  }
  if (a.i("scale_grad_by_freq") != 0) {
    // Each occurrence's share over its index's count among all the indices, as CUDA and the
    // CPU's embedding divide it. (The CPU's embedding_bag in PyTorch 2.13 divides some rows by
    // another index's count: pytorch/pytorch#190063.)
    Value counts = scatter_rows(b, full(b, c, {result[0], 1}, 0), index, full(b, c, {n, 1}, 1),
                                "stablehlo.add");
    Value count = reshape(b, gather_rows(b, counts, index), {n});
    share = binary(b, "stablehlo.divide", share, column(b, count, d));
  }
  Value keep = column(b, counted(b, index, padding_idx), d);
  share = select(b, keep, share, full(b, c, {n, d}, 0));
  return {convert(b, scatter_rows(b, zeros, index, share, "stablehlo.add"), t)};
}

// _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
// padding_idx) -> [n]: each index's row dotted with its bag's gradient.
Values per_sample_weights_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value grad = convert(b, v[0], c), weight = convert(b, v[1], c);
  Value index = convert(b, v[2], kIndex);
  int64_t n = index.shape.numel();
  if (n == 0 || grad.shape.numel() == 0) return {full(b, t, out_shape(a), 0)};
  index = reshape(b, index, {n});
  Value keep = counted(b, index, a.i("padding_idx"));
  Value safe = select(b, keep, index, full(b, kIndex, {n}, 0));
  Value bag = reshape(b, convert(b, v[4], kIndex), {n});
  Value product = binary(b, "stablehlo.multiply", gather_rows(b, grad, bag), gather_rows(b, weight, safe));
  Value dot = reduce(b, product, {1}, constant(b, c, 0), "stablehlo.add");
  return {convert(b, select(b, keep, dot, full(b, c, {n}, 0)), t)};
}

}  // namespace

void register_embedding_bag_rules(Registry& r) {
  r.add("embedding_bag", embedding_bag,
        {"_embedding_bag", "_embedding_bag.out", "_embedding_bag_forward_only",
         "_embedding_bag_forward_only.out"});
  r.add("embedding_bag_backward", embedding_bag_backward,
        {"_embedding_bag_backward", "_embedding_bag_dense_backward",
         "_embedding_bag_dense_backward.out"});
  r.add("embedding_bag_per_sample_weights_backward", per_sample_weights_backward,
        {"_embedding_bag_per_sample_weights_backward",
         "_embedding_bag_per_sample_weights_backward.out"});
}

}  // namespace torchtpu::lowering
