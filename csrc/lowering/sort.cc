// Sorting and order statistics: sort, topk, kthvalue, median, nanmedian, mode. Each sorts along
// its dimension (stably, NaN last) and picks positions from the sorted values and indices.
#include <cmath>
#include <tuple>

#include "lowering/helpers.h"
#include "lowering/registry.h"
#include "lowering/scan.h"

namespace torchtpu::lowering {
namespace {

// Stable sort of `x` along `axis` with its indices; NaN sorts as the largest value, as in PyTorch.
std::pair<Value, Value> sort_along(FunctionBuilder& b, const Value& x, int64_t axis,
                                   bool descending) {
  ElementType t = x.shape.type;
  Value index = iota(b, ElementType::kS64, x.shape.dims, axis);
  Shape vs{t, {}}, is{ElementType::kS64, {}};
  auto r = b.op_with_region(
      "stablehlo.sort", {x, index}, {x.shape, index.shape}, {vs, vs, is, is},
      [descending, t](FunctionBuilder& r, const std::vector<Value>& args) {
        const Value &a = args[0], &c = args[1];
        Value before = compare(r, a, c, descending ? "GT" : "LT");
        if (hlo::is_floating(t)) {
          Value nan_a = compare(r, a, a, "NE"), nan_c = compare(r, c, c, "NE");
          Value nan_first = descending ? b_and(r, nan_a, unary(r, "stablehlo.not", nan_c))
                                       : b_and(r, unary(r, "stablehlo.not", nan_a), nan_c);
          before = b_or(r, before, nan_first);
        }
        return std::vector<Value>{before};
      },
      "dimension = " + std::to_string(axis) + " : i64, is_stable = true");
  return {r[0], r[1]};
}

// sort(self, stable?, dim, descending) -> (values, indices)
Values sort(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  if (x.shape.rank() == 0) return {x, constant(b, ElementType::kS64, 0)};
  auto [values, indices] = sort_along(b, x, normalize_dim(a.i("dim"), x.shape.rank()),
                                      a.i("descending") != 0);
  return {values, indices};
}

// topk(self, k, dim, largest, sorted) -> (values, indices)
Values topk(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  if (x.shape.rank() == 0) return {x, constant(b, ElementType::kS64, 0)};
  int64_t axis = normalize_dim(a.i("dim"), x.shape.rank());
  auto [values, indices] = sort_along(b, x, axis, a.i("largest") != 0);
  Dims start(x.shape.rank(), 0), limit = x.shape.dims;
  limit[axis] = a.i("k");
  return {slice(b, values, start, limit), slice(b, indices, start, limit)};
}

// x's dims without `axis`.
Dims without(const Dims& dims, int64_t axis) {
  Dims out;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (static_cast<int64_t>(d) != axis) out.push_back(dims[d]);
  }
  return out;
}

// The elements of `x` at position `pos` (x's shape without `axis`) along `axis`.
Value pick_along(FunctionBuilder& b, const Value& x, int64_t axis, const Value& pos) {
  size_t rank = x.shape.rank();
  Dims out = without(x.shape.dims, axis), with_one = out;
  with_one.push_back(1);
  std::vector<Value> parts;
  int64_t k = 0;
  for (size_t d = 0; d < rank; ++d) {
    Value c = static_cast<int64_t>(d) == axis ? pos : iota(b, ElementType::kS64, out, k++);
    parts.push_back(reshape(b, c, with_one));
  }
  Dims all;
  for (size_t d = 0; d < rank; ++d) all.push_back(static_cast<int64_t>(d));
  std::string list = FunctionBuilder::i64_list(all);
  return b.op("stablehlo.gather", {x, concatenate(b, parts, static_cast<int64_t>(out.size()))},
              Shape{x.shape.type, out},
              "dimension_numbers = #stablehlo.gather<collapsed_slice_dims = " + list +
                  ", start_index_map = " + list + ", index_vector_dim = " +
                  std::to_string(out.size()) + ">, slice_sizes = " +
                  FunctionBuilder::i64_array(Dims(rank, 1)) + ", indices_are_sorted = false");
}

// How many NaNs each slice along `axis` holds (zero for non-floating types).
Value nan_count(FunctionBuilder& b, const Value& x, int64_t axis) {
  Dims out = without(x.shape.dims, axis);
  if (!hlo::is_floating(x.shape.type)) return full(b, ElementType::kS64, out, 0);
  Value nan = convert(b, compare(b, x, x, "NE"), ElementType::kS64);
  return reduce(b, nan, {axis}, constant(b, ElementType::kS64, 0), "stablehlo.add");
}

enum class Statistic { kKth, kMedian, kNanMedian };

// The position in the sorted slice each statistic picks: the k-th; the lower median, or the
// first NaN where there is one; the lower median of the numbers (position 0 if all are NaN).
Value position(FunctionBuilder& b, const Value& x, int64_t axis, Statistic s, int64_t k) {
  Dims out = without(x.shape.dims, axis);
  int64_t n = x.shape.dims[axis];
  auto scalar = [&](int64_t value) {
    return full(b, ElementType::kS64, out, static_cast<double>(value));
  };
  if (s == Statistic::kKth) return scalar(k - 1);
  if (!hlo::is_floating(x.shape.type)) return scalar((n - 1) / 2);
  Value nans = nan_count(b, x, axis), zero = scalar(0);
  Value numbers = binary(b, "stablehlo.subtract", scalar(n), nans);
  if (s == Statistic::kMedian) {
    return select(b, compare(b, nans, zero, "GT"), numbers, scalar((n - 1) / 2));
  }
  Value lower = binary(b, "stablehlo.divide", binary(b, "stablehlo.subtract", numbers, scalar(1)),
                       scalar(2));
  return select(b, compare(b, numbers, zero, "GT"), lower, zero);
}

// kthvalue(self, k, dim, keepdim) / median.dim / nanmedian.dim(self, dim, keepdim) -> (values,
// indices); median / nanmedian(self) over everything -> values.
LoweringRule order_statistic(Statistic s) {
  return [s](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = v[0];
    bool whole = !a.has("dim");
    if (whole) {
      x = reshape(b, x, {x.shape.numel()});
      if (x.shape.numel() == 0) {
        return Values{full(b, out_type(a), out_shape(a), std::nan(""))};
      }
    }
    if (x.shape.rank() == 0) return Values{x, constant(b, ElementType::kS64, 0)};
    int64_t axis = whole ? 0 : normalize_dim(a.i("dim"), x.shape.rank());
    if (x.shape.numel() == 0) {  // nothing to gather from
      return Values{full(b, x.shape.type, out_shape(a), 0),
                    full(b, ElementType::kS64, out_shape(a, 1), 0)};
    }
    auto [values, indices] = sort_along(b, x, axis, false);
    Value pos = position(b, x, axis, s, a.has("k") ? a.i("k") : 0);
    Value value = reshape(b, pick_along(b, values, axis, pos), out_shape(a));
    if (whole) return Values{value};
    return Values{value, reshape(b, pick_along(b, indices, axis, pos), out_shape(a, 1))};
  };
}

// Where each run of equal values begins in `sorted` along `axis` (NaNs never equal each other).
Value first_of_runs(FunctionBuilder& b, const Value& sorted, int64_t axis) {
  const Dims& dims = sorted.shape.dims;
  Dims start(dims.size(), 0), limit = dims, first = dims;
  limit[axis] = dims[axis] - 1;
  first[axis] = 1;
  Value previous =
      concatenate(b, {slice(b, sorted, start, first), slice(b, sorted, start, limit)}, axis);
  Value j = iota(b, ElementType::kS64, dims, axis);
  return b_or(b, compare(b, sorted, previous, "NE"),
              compare(b, j, full(b, ElementType::kS64, dims, 0), "EQ"));
}

// mode(self, dim, keepdim) -> (values, indices): the most frequent value, the smallest among
// equally frequent ones (NaNs never equal each other), and its last position.
Values mode(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  if (x.shape.rank() == 0) return {x, constant(b, ElementType::kS64, 0)};
  int64_t axis = normalize_dim(a.i("dim"), x.shape.rank());
  int64_t n = x.shape.dims[axis];
  if (x.shape.numel() == 0) {
    return {full(b, x.shape.type, out_shape(a), 0), full(b, ElementType::kS64, out_shape(a, 1), 0)};
  }
  auto [values, indices] = sort_along(b, x, axis, false);
  const Dims& dims = x.shape.dims;
  Value j = iota(b, ElementType::kS64, dims, axis);
  Value zero = full(b, ElementType::kS64, dims, 0);
  Value run_starts = first_of_runs(b, values, axis);
  Value run_start = running_extreme(b, select(b, run_starts, j, zero), axis, true).first;
  Value length = binary(b, "stablehlo.subtract", j, run_start);  // one less than the run's length
  Value longest = reduce_extreme(b, length, {axis}, true);
  Value at_longest =
      compare(b, length, broadcast_to(b, keep_dims(b, longest, dims, {axis}), dims), "EQ");
  Value pos = reduce_extreme(b, select(b, at_longest, j, full(b, ElementType::kS64, dims, n)),
                             {axis}, false);
  return {reshape(b, pick_along(b, values, axis, pos), out_shape(a)),
          reshape(b, pick_along(b, indices, axis, pos), out_shape(a, 1))};
}


// unique(self) with the number of distinct values known (attrs shape [n]): the values (sorted,
// or in order of their runs when `consecutive`), each element's position among them
// (shape1) and how often each occurs (shape2).
Values unique(FunctionBuilder& b, const Values& v, const Attrs& a) {
  int64_t total = v[0].shape.numel(), n = out_shape(a)[0];
  Value x = reshape(b, v[0], {total});
  Value values = x, order = iota(b, ElementType::kS64, {total}, 0);
  if (a.i("consecutive") == 0) std::tie(values, order) = sort_along(b, x, 0, false);
  Value starts = convert(b, first_of_runs(b, values, 0), ElementType::kS64);
  Value run = binary(b, "stablehlo.subtract", prefix_sum(b, starts, 0),
                     full(b, ElementType::kS64, {total}, 1));
  Value at_run = reshape(b, run, {total, 1});
  std::string dims =
      "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], "
      "scatter_dims_to_operand_dims = [0], index_vector_dim = 1>";
  Value distinct = scatter(b, full(b, x.shape.type, {n}, 0), at_run, values, false, dims);
  Value inverse = scatter(b, full(b, ElementType::kS64, {total}, 0), reshape(b, order, {total, 1}),
                          run, false, dims);
  Value counts = scatter(b, full(b, ElementType::kS64, {n}, 0), at_run,
                         full(b, ElementType::kS64, {total}, 1), true, dims);
  return {distinct, reshape(b, inverse, out_shape(a, 1)), counts};
}

}  // namespace

void register_sort_rules(Registry& r) {
  r.add("sort", sort, {"sort", "sort.stable", "sort.values", "sort.values_stable"});
  r.add("topk", topk, {"topk", "topk.values"});
  r.add("kthvalue", order_statistic(Statistic::kKth), {"kthvalue", "kthvalue.values"});
  r.add("median", order_statistic(Statistic::kMedian),
        {"median", "median.dim", "median.dim_values"});
  r.add("nanmedian", order_statistic(Statistic::kNanMedian),
        {"nanmedian", "nanmedian.dim", "nanmedian.dim_values"});
  r.add("mode", mode, {"mode", "mode.values"});
  r.add("unique", unique);
}

}  // namespace torchtpu::lowering
