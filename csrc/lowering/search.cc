// Membership and binning: isin, bucketize, searchsorted, histc, histograms. The first three compare
// every element with every test value or boundary (broadcast), which suits the small sets these
// ops see in models; the histograms find a value's bin from its position in the range.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

bool integral(ElementType t) { return !hlo::is_floating(t) && !hlo::is_complex(t); }

// PyTorch's result type of a tensor of type `tensor` and a Python number (a 0-d operand of
// type `number`: i1, i64 or f64): the number only raises the category (to the default float).
ElementType with_number(ElementType tensor, ElementType number) {
  if (hlo::is_floating(number) && integral(tensor)) return ElementType::kF32;
  if (number == ElementType::kS64 && tensor == ElementType::kPred) return ElementType::kS64;
  return tensor;
}

// isin.Tensor_Tensor(elements, test_elements, assume_unique, invert), and with a Python number
// for either (`number_side` 0 or 1): that number meets the other operand's type.
LoweringRule isin(int number_side) {
  return [number_side](FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value elements = v[0], tests = v[1];
  ElementType c = number_side == 0   ? with_number(tests.shape.type, elements.shape.type)
                  : number_side == 1 ? with_number(elements.shape.type, tests.shape.type)
                                     : compute_type(a);
  bool invert = a.i("invert") != 0;
  Dims shape = elements.shape.dims;
  int64_t m = tests.shape.numel();
  if (m == 0 || elements.shape.numel() == 0) {
    return Values{full(b, ElementType::kPred, out_shape(a), invert)};
  }
  Dims wide = shape;
  wide.push_back(m);
  Dims leading;
  for (size_t d = 0; d < shape.size(); ++d) leading.push_back(static_cast<int64_t>(d));
  Value e = broadcast_in_dim(b, convert(b, elements, c), wide, leading);
  Value t = broadcast_in_dim(b, reshape(b, convert(b, tests, c), {m}), wide,
                             {static_cast<int64_t>(shape.size())});
  Value found = reduce(b, compare(b, e, t, "EQ"), {static_cast<int64_t>(shape.size())},
                       constant(b, ElementType::kPred, false), "stablehlo.or");
  if (invert) found = unary(b, "stablehlo.not", found);
  return Values{reshape(b, found, out_shape(a))};
  };
}

// How many of the (sorted) `boundaries` lie before each value: those not >= it (left) or not >
// it (right), so a NaN boundary at the end counts before every value, as PyTorch's binary search
// has it. `boundaries` is 1-d, or one row per leading index of `values`.
Value insertion_points(FunctionBuilder& b, const Value& values, const Value& boundaries,
                       bool right, ElementType c, ElementType out) {
  Dims shape = values.shape.dims;
  int64_t m = boundaries.shape.dims.empty() ? 1 : boundaries.shape.dims.back();
  Dims wide = shape;
  wide.push_back(m);
  Dims leading, boundary_dims;
  for (size_t d = 0; d < shape.size(); ++d) leading.push_back(static_cast<int64_t>(d));
  for (size_t d = 0; d + 1 < boundaries.shape.rank(); ++d) {
    boundary_dims.push_back(static_cast<int64_t>(d));
  }
  boundary_dims.push_back(static_cast<int64_t>(shape.size()));
  Value x = broadcast_in_dim(b, convert(b, values, c), wide, leading);
  Value bounds = boundaries.shape.rank() == 0 ? reshape(b, boundaries, {1}) : boundaries;
  bounds = broadcast_in_dim(b, convert(b, bounds, c), wide, boundary_dims);
  Value before = unary(b, "stablehlo.not", compare(b, bounds, x, right ? "GT" : "GE"));
  Value n = reduce(b, convert(b, before, out), {static_cast<int64_t>(shape.size())},
                   constant(b, out, 0), "stablehlo.add");
  return n;
}

// searchsorted(sorted_sequence, self, out_int32, right, side, sorter): operands sorted_sequence,
// self, sorter (if given).
Values searchsorted(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value sorted = v[0], values = v[1];
  ElementType out = out_type(a);
  if (values.shape.numel() == 0 || sorted.shape.numel() == 0) {
    return {full(b, out, out_shape(a), 0)};
  }
  if (v.size() > 2) {  // the sequence in sorter's order
    const Dims& d = sorted.shape.dims;
    size_t rank = d.size();
    Value order = v[2];
    std::vector<Value> parts;
    Dims with_one = d;
    with_one.push_back(1);
    for (size_t k = 0; k < rank; ++k) {
      Value c = k + 1 == rank ? convert(b, order, ElementType::kS64)
                              : iota(b, ElementType::kS64, d, static_cast<int64_t>(k));
      parts.push_back(reshape(b, c, with_one));
    }
    Dims all;
    for (size_t k = 0; k < rank; ++k) all.push_back(static_cast<int64_t>(k));
    std::string list = FunctionBuilder::i64_list(all);
    sorted = b.op("stablehlo.gather", {sorted, concatenate(b, parts, static_cast<int64_t>(rank))},
                  sorted.shape,
                  "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = " + list +
                      ", start_index_map = " + list + ", index_vector_dim = " +
                      std::to_string(rank) + ">, slice_sizes = " +
                      FunctionBuilder::i64_array(Dims(rank, 1)) + ", indices_are_sorted = false");
  }
  bool right = a.i("right") != 0 || (a.has("side") && a.s("side") == "right");
  return {reshape(b, insertion_points(b, values, sorted, right, compute_type(a), out),
                  out_shape(a))};
}

// bucketize.Tensor(self, boundaries, out_int32, right) / .Scalar(Scalar self, boundaries, ...)
Values bucketize(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType out = out_type(a);
  if (v[0].shape.numel() == 0 || v[1].shape.numel() == 0) return {full(b, out, out_shape(a), 0)};
  return {reshape(b, insertion_points(b, v[0], reshape(b, v[1], {v[1].shape.numel()}),
                                      a.i("right") != 0, compute_type(a), out),
                  out_shape(a))};
}

// How a value finds its bin among `bins` bins from lo to hi, as PyTorch's CPU kernel has it.
enum class BinSearch {
  kLinear,  // (x - lo) * bins / (hi - lo), truncated: histc
  kLocal,   // that, then corrected against the edges next to it: histogram with a bin count
  kEdges,   // the last edge not above x: histogram with given edges (assumed sorted)
};

// 1-d gather: table[index] for each element of `index` (in range).
Value lookup(FunctionBuilder& b, const Value& table, const Value& index) {
  int64_t n = index.shape.numel();
  return b.op("stablehlo.gather", {table, reshape(b, index, {n, 1})}, Shape{table.shape.type, {n}},
              "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = [0], "
              "start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1>, "
              "indices_are_sorted = false");
}

// Which values of `x` (1-d) are counted, those in [lo, hi] (not NaN), and the bin of each, in
// [0, bins): hi falls in the last bin. `edges` (bins + 1 of them) serve kLocal and kEdges.
std::pair<Value, Value> bin_of(FunctionBuilder& b, const Value& x, const Value& lo, const Value& hi,
                               int64_t bins, BinSearch search, const Value* edges) {
  ElementType t = x.shape.type, s64 = ElementType::kS64;
  Dims n = x.shape.dims;
  Value lo_n = broadcast_in_dim(b, lo, n, {}), hi_n = broadcast_in_dim(b, hi, n, {});
  Value counted = b_and(b, compare(b, x, lo_n, "GE"), compare(b, x, hi_n, "LE"));
  Value bin;
  if (search == BinSearch::kEdges) {
    bin = binary(b, "stablehlo.subtract", insertion_points(b, x, *edges, true, t, s64),
                 full(b, s64, n, 1));
  } else {
    Value scaled = binary(b, "stablehlo.divide",
                          binary(b, "stablehlo.multiply", binary(b, "stablehlo.subtract", x, lo_n),
                                 full(b, t, n, static_cast<double>(bins))),
                          binary(b, "stablehlo.subtract", hi_n, lo_n));
    bin = convert(b, select(b, counted, scaled, full(b, t, n, 0)), s64);
  }
  if (search == BinSearch::kLocal) {
    // upper_bound over the edges [bin - 1, bin + 2), less one.
    Value first =
        maximum(b, binary(b, "stablehlo.subtract", bin, full(b, s64, n, 1)), full(b, s64, n, 0));
    Value end = minimum(b, binary(b, "stablehlo.add", bin, full(b, s64, n, 2)),
                        full(b, s64, n, static_cast<double>(bins + 1)));
    Value below = full(b, s64, n, 0);
    for (int64_t j = 0; j < 3; ++j) {
      Value k = binary(b, "stablehlo.add", first, full(b, s64, n, static_cast<double>(j)));
      Value edge = lookup(b, *edges, minimum(b, k, full(b, s64, n, static_cast<double>(bins))));
      Value not_above =
          b_and(b, compare(b, k, end, "LT"), unary(b, "stablehlo.not", compare(b, edge, x, "GT")));
      below = binary(b, "stablehlo.add", below, convert(b, not_above, s64));
    }
    bin = binary(b, "stablehlo.subtract", binary(b, "stablehlo.add", first, below),
                 full(b, s64, n, 1));
  }
  bin =
      b.op("stablehlo.clamp",
           {constant(b, s64, 0), bin, constant(b, s64, static_cast<double>(bins - 1))}, bin.shape);
  return {counted, bin};
}

// Adds each counted value's weight into its bin of a flat histogram of `size` bins.
Value accumulate(FunctionBuilder& b, const Value& counted, const Value& bin, const Value& weight,
                 int64_t size) {
  ElementType t = weight.shape.type;
  int64_t n = bin.shape.numel();
  return scatter(b, full(b, t, {size}, 0), reshape(b, bin, {n, 1}),
                 select(b, counted, weight, full(b, t, {n}, 0)), true,
                 "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
                 "[0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>");
}

// histc(self, bins, min, max): equal-width bins over [min, max] (the data's own range when
// min == max, widened by 1 each side if that is empty too); values outside it, and NaN, are not
// counted; max itself falls in the last bin.
Values histc(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  int64_t bins = a.i("bins");
  Value x = convert(b, v[0], t);
  int64_t n = x.shape.numel();
  x = reshape(b, x, {n});
  Value lo = convert(b, v[1], t), hi = convert(b, v[2], t);
  if (n > 0) {
    Value same = compare(b, lo, hi, "EQ");
    lo = select(b, same, reduce_extreme(b, x, {0}, false), lo);
    hi = select(b, same, reduce_extreme(b, x, {0}, true), hi);
  }
  Value one = constant(b, t, 1);
  Value still = compare(b, lo, hi, "EQ");
  lo = select(b, still, binary(b, "stablehlo.subtract", lo, one), lo);
  hi = select(b, still, binary(b, "stablehlo.add", hi, one), hi);
  if (n == 0) return {full(b, t, {bins}, 0)};
  auto [counted, bin] = bin_of(b, x, lo, hi, bins, BinSearch::kLinear, nullptr);
  return {accumulate(b, counted, bin, full(b, t, {n}, 1), bins)};
}

// histogram_edges(x): for each dimension d of the points x (M > 0 of them, (M, N)), out_shape(d)
// equal-width edges over the points' range in it, widened by 0.5 each side when that is one
// value: linspace from the ends as float64 numbers, as PyTorch makes them from the ends it reads.
Values histogram_edges(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value& x = v[0];
  int64_t m = x.shape.dims[0], dims = x.shape.dims[1];
  LoweringRule linspace = rule("linspace");
  Values edges;
  for (int64_t d = 0; d < dims; ++d) {
    Value column = reshape(b, slice(b, x, {0, d}, {m, d + 1}), {m});
    Value lo = convert(b, reduce_extreme(b, column, {0}, false), ElementType::kF64);
    Value hi = convert(b, reduce_extreme(b, column, {0}, true), ElementType::kF64);
    Value same = compare(b, lo, hi, "EQ"), half = constant(b, ElementType::kF64, 0.5);
    lo = select(b, same, binary(b, "stablehlo.subtract", lo, half), lo);
    hi = select(b, same, binary(b, "stablehlo.add", hi, half), hi);
    Attrs ends;
    ends.set_type("type", out_type(a, static_cast<int>(d)))
        .set("shape", out_shape(a, static_cast<int>(d)));
    edges.push_back(linspace(b, Values{lo, hi}, ends)[0]);
  }
  return edges;
}

// histogramdd(x, edges..., weight?): x is (M, N), M points in N dimensions; one 1-d tensor of
// edges per dimension; attrs `search` (1: kLocal, 2: kEdges), `weighted`, `density`. A point
// counts (its weight, else 1) in the bin its coordinates select when every one lies within its
// dimension's first and last edge. With `density`, counts are divided by their total and by
// each bin's widths.
Values histogramdd(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Dims shape = out_shape(a);
  int64_t m = v[0].shape.dims[0], dims = v[0].shape.dims[1];
  BinSearch search = a.i("search") == 1 ? BinSearch::kLocal : BinSearch::kEdges;
  int64_t size = 1;
  for (int64_t s : shape) size *= s;
  Value hist = full(b, t, {size}, 0);
  if (m > 0 && dims > 0) {
    Value x = convert(b, v[0], t);
    Value counted = full(b, ElementType::kPred, {m}, 1);
    Value flat = full(b, ElementType::kS64, {m}, 0);
    for (int64_t d = 0; d < dims; ++d) {
      Value edges = convert(b, v[1 + d], t);
      int64_t bins = shape[d];
      Value column = reshape(b, slice(b, x, {0, d}, {m, d + 1}), {m});
      Value lo = reshape(b, slice(b, edges, {0}, {1}), {});
      Value hi = reshape(b, slice(b, edges, {bins}, {bins + 1}), {});
      auto [in, bin] = bin_of(b, column, lo, hi, bins, search, &edges);
      counted = b_and(b, counted, in);
      flat = binary(b, "stablehlo.add",
                    binary(b, "stablehlo.multiply", flat,
                           full(b, ElementType::kS64, {m}, static_cast<double>(bins))),
                    bin);
    }
    Value weight =
        a.i("weighted") != 0 ? reshape(b, convert(b, v[1 + dims], t), {m}) : full(b, t, {m}, 1);
    hist = accumulate(b, counted, flat, weight, size);
  }
  hist = reshape(b, hist, shape);
  if (a.i("density") == 0) return {hist};
  Dims all;
  for (int64_t d = 0; d < dims; ++d) all.push_back(d);
  Value total = reduce(b, hist, all, constant(b, t, 0), "stablehlo.add");
  hist = binary(b, "stablehlo.divide", hist, broadcast_in_dim(b, total, shape, {}));
  for (int64_t d = 0; d < dims; ++d) {
    Value edges = convert(b, v[1 + d], t);
    int64_t bins = shape[d];
    Value widths = binary(b, "stablehlo.subtract", slice(b, edges, {1}, {bins + 1}),
                          slice(b, edges, {0}, {bins}));
    hist = binary(b, "stablehlo.divide", hist, broadcast_in_dim(b, widths, shape, {d}));
  }
  return {hist};
}

}  // namespace

void register_search_rules(Registry& r) {
  r.add("isin", isin(-1), {"isin.Tensor_Tensor", "isin.Tensor_Tensor_out"});
  r.add("isin_number", isin(1), {"isin.Tensor_Scalar", "isin.Tensor_Scalar_out"});
  r.add("number_isin", isin(0), {"isin.Scalar_Tensor", "isin.Scalar_Tensor_out"});
  r.add("searchsorted", searchsorted,
        {"searchsorted.Tensor", "searchsorted.Tensor_out", "searchsorted.Scalar",
         "searchsorted.Scalar_out"});
  r.add("bucketize", bucketize,
        {"bucketize.Tensor", "bucketize.Tensor_out", "bucketize.Scalar", "bucketize.Scalar_out"});
  r.add("histc", histc, {"histc", "histc.out"});
  r.add("histogram_edges", histogram_edges);
  r.add("histogramdd", histogramdd);
}

}  // namespace torchtpu::lowering
