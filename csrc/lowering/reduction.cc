// Reductions. The output shape from PyTorch's meta function already says keepdim or not, so each
// rule reduces over its dimensions and reshapes to it.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

int64_t count(const Dims& shape, const Dims& axes) {
  int64_t n = 1;
  for (int64_t d : axes) n *= shape[d];
  return n;
}

// sum / prod: operand self, attrs dim (optional), dtype (optional).
LoweringRule folding(const std::string& op, int init) {
  return [op, init](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = t == ElementType::kPred ? t : opmath(t);
    Value x = convert(b, v[0], c);
    Dims axes = reduction_dims(a, "dim", x.shape.rank());
    Value r = reduce(b, x, axes, constant(b, c, init), op);
    return Values{convert(b, reshape(b, r, out_shape(a)), t)};
  };
}

// amax / amin (and max / min over everything): operand self, attrs dim (optional). NaN wins.
LoweringRule extremum(bool largest) {
  return [largest](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Dims axes = reduction_dims(a, "dim", v[0].shape.rank());
    return Values{reshape(b, reduce_extreme(b, v[0], axes, largest), out_shape(a))};
  };
}

Values mean(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  Dims axes = reduction_dims(a, "dim", x.shape.rank());
  Value sum = reduce(b, x, axes, constant(b, c, 0), "stablehlo.add");
  Value n = full(b, c, sum.shape.dims, static_cast<double>(count(x.shape.dims, axes)));
  return {convert(b, reshape(b, binary(b, "stablehlo.divide", sum, n), out_shape(a)), t)};
}

// any / all: over dim(s) or everything; the output is bool (uint8 for uint8 input).
LoweringRule boolean(const std::string& op, bool init) {
  return [op, init](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = convert(b, v[0], ElementType::kPred);
    Dims axes = reduction_dims(a, "dim", x.shape.rank());
    Value r = reduce(b, x, axes, constant(b, ElementType::kPred, init), op);
    return Values{convert(b, reshape(b, r, out_shape(a)), out_type(a))};
  };
}

// Values and indices of the max (or min) along `axis`, first occurrence on ties, NaN wins.
std::pair<Value, Value> arg_reduce(FunctionBuilder& b, const Value& x, int64_t axis, bool max) {
  ElementType t = x.shape.type;
  Value index = iota(b, ElementType::kS64, x.shape.dims, axis);
  Shape vs{t, {}}, is{ElementType::kS64, {}};
  Dims out;
  for (size_t d = 0; d < x.shape.rank(); ++d) {
    if (static_cast<int64_t>(d) != axis) out.push_back(x.shape.dims[d]);
  }
  Value init_v = extreme(b, t, !max), init_i = constant(b, ElementType::kS64, 0);
  auto results = b.op_with_region(
      "stablehlo.reduce", {x, index, init_v, init_i}, {Shape{t, out}, Shape{ElementType::kS64, out}},
      {vs, is, vs, is},
      [max, t](FunctionBuilder& r, const std::vector<Value>& args) {
        const Value &v1 = args[0], &i1 = args[1], &v2 = args[2], &i2 = args[3];
        Value better = compare(r, v1, v2, max ? "GT" : "LT");
        Value tie = b_and(r, compare(r, v1, v2, "EQ"), compare(r, i1, i2, "LT"));
        Value take1 = b_or(r, better, tie);
        if (hlo::is_floating(t)) {
          Value nan1 = compare(r, v1, v1, "NE"), nan2 = compare(r, v2, v2, "NE");
          Value first_nan = b_and(r, nan1, b_or(r, unary(r, "stablehlo.not", nan2),
                                                compare(r, i1, i2, "LT")));
          take1 = select(r, b_or(r, nan1, nan2), first_nan, take1);
        }
        return std::vector<Value>{select(r, take1, v1, v2), select(r, take1, i1, i2)};
      },
      "dimensions = " + FunctionBuilder::i64_array({axis}));
  return {results[0], results[1]};
}

// max.dim / min.dim: (values, indices).
LoweringRule extremum_dim(bool max) {
  return [max](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = v[0];
    if (x.shape.rank() == 0) return Values{x, constant(b, ElementType::kS64, 0)};
    auto [values, indices] = arg_reduce(b, x, normalize_dim(a.i("dim"), x.shape.rank()), max);
    return Values{reshape(b, values, out_shape(a, 0)), reshape(b, indices, out_shape(a, 1))};
  };
}

// argmax / argmin(self, dim?, keepdim): without dim, over the flattened tensor.
LoweringRule arg_extremum(bool max) {
  return [max](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = v[0];
    int64_t axis = 0;
    if (!a.has("dim")) {
      x = reshape(b, x, {x.shape.numel()});
    } else if (x.shape.rank() == 0) {
      return Values{constant(b, ElementType::kS64, 0)};
    } else {
      axis = normalize_dim(a.i("dim"), x.shape.rank());
    }
    return Values{reshape(b, arg_reduce(b, x, axis, max).second, out_shape(a))};
  };
}

// var / std(self, dim?, correction?, keepdim): operands self, correction (when given).
LoweringRule variance(bool root, bool with_mean = false) {
  return [root, with_mean](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    Value x = convert(b, v[0], c);
    Dims axes = reduction_dims(a, "dim", x.shape.rank());
    double n = static_cast<double>(count(x.shape.dims, axes));
    Value sum = reduce(b, x, axes, constant(b, c, 0), "stablehlo.add");
    Value mu = keep_dims(b, binary(b, "stablehlo.divide", sum, full(b, c, sum.shape.dims, n)),
                         x.shape.dims, axes);
    Value dev = binary(b, "stablehlo.subtract", x, broadcast_to(b, mu, x.shape.dims));
    Value sq = reduce(b, binary(b, "stablehlo.multiply", dev, dev), axes, constant(b, c, 0),
                      "stablehlo.add");
    Value correction = v.size() > 1 ? convert(b, v[1], c) : constant(b, c, 1);
    Value divisor = binary(b, "stablehlo.subtract", full(b, c, sq.shape.dims, n),
                           broadcast_to(b, correction, sq.shape.dims));
    divisor = maximum(b, divisor, full(b, c, sq.shape.dims, 0));
    Value var = binary(b, "stablehlo.divide", sq, divisor);
    if (root) var = unary(b, "stablehlo.sqrt", var);
    Values out{convert(b, reshape(b, var, out_shape(a)), t)};
    if (with_mean) out.push_back(convert(b, reshape(b, mu, out_shape(a, 1)), out_type(a, 1)));
    return out;
  };
}

Values logsumexp(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  Dims axes = reduction_dims(a, "dim", x.shape.rank());
  Value m = reduce_extreme(b, x, axes, true);
  // An all -inf slice keeps -inf (not NaN): shift by 0 there.
  Value finite = b.op("stablehlo.is_finite", {m}, Shape{ElementType::kPred, m.shape.dims});
  Value shift = select(b, finite, m, full(b, c, m.shape.dims, 0));
  Value shifted = binary(b, "stablehlo.subtract", x,
                         broadcast_to(b, keep_dims(b, shift, x.shape.dims, axes), x.shape.dims));
  Value s = reduce(b, unary(b, "stablehlo.exponential", shifted), axes, constant(b, c, 0),
                   "stablehlo.add");
  Value r = binary(b, "stablehlo.add", unary(b, "stablehlo.log", s), shift);
  return {convert(b, reshape(b, r, out_shape(a)), t)};
}

// cumsum(self, dim, dtype?)
Values cumsum(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  if (x.shape.rank() == 0) return {convert(b, x, t)};
  return {convert(b, prefix_sum(b, x, normalize_dim(a.i("dim"), x.shape.rank())), t)};
}

// nonzero(self) with its count known (attrs shape [n, rank]): the coordinates of the nonzero
// elements in row-major order.
Values nonzero(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  Dims shape = out_shape(a);
  int64_t n = shape[0], rank = shape[1], total = x.shape.numel();
  Value mask = reshape(b, compare(b, x, full(b, x.shape.type, x.shape.dims, 0), "NE"), {total});
  Value position = binary(b, "stablehlo.subtract",
                          prefix_sum(b, convert(b, mask, ElementType::kS64), 0),
                          full(b, ElementType::kS64, {total}, 1));
  Value target = select(b, mask, position, full(b, ElementType::kS64, {total}, n));
  std::vector<Value> columns;
  for (int64_t d = 0; d < rank; ++d) {
    columns.push_back(reshape(b, iota(b, ElementType::kS64, x.shape.dims, d), {total, 1}));
  }
  Value coords = rank ? concatenate(b, columns, 1) : full(b, ElementType::kS64, {total, 0}, 0);
  Shape scalar{ElementType::kS64, {}};
  Value rows = b.op_with_region(
      "stablehlo.scatter", {full(b, ElementType::kS64, {n + 1, rank}, 0),
                            reshape(b, target, {total, 1}), coords},
      {Shape{ElementType::kS64, {n + 1, rank}}}, {scalar, scalar},
      [](FunctionBuilder&, const std::vector<Value>& args) { return std::vector<Value>{args[1]}; },
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
      "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
      "indices_are_sorted = true, unique_indices = false")[0];
  return {slice(b, rows, {0, 0}, {n, rank})};
}

// linalg_vector_norm(self, ord, dim?, keepdim, dtype?): ord is a static attribute.
Values vector_norm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, modulus(b, v[0]), c);
  Dims axes = reduction_dims(a, "dim", x.shape.rank());
  double ord = a.f("ord");
  Value r;
  if (std::isinf(ord)) {
    r = reduce_extreme(b, x, axes, ord > 0);
  } else if (ord == 0) {
    Value nonzero = convert(b, compare(b, x, full(b, c, x.shape.dims, 0), "NE"), c);
    r = reduce(b, nonzero, axes, constant(b, c, 0), "stablehlo.add");
  } else if (ord == 1) {
    r = reduce(b, x, axes, constant(b, c, 0), "stablehlo.add");
  } else if (ord == 2) {
    r = unary(b, "stablehlo.sqrt", reduce(b, binary(b, "stablehlo.multiply", x, x), axes,
                                          constant(b, c, 0), "stablehlo.add"));
  } else {
    Value p = full(b, c, x.shape.dims, ord);
    Value s = reduce(b, binary(b, "stablehlo.power", x, p), axes, constant(b, c, 0),
                     "stablehlo.add");
    r = binary(b, "stablehlo.power", s, full(b, c, s.shape.dims, 1.0 / ord));
  }
  return {convert(b, reshape(b, r, out_shape(a)), t)};
}

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

}  // namespace

Value b_and(FunctionBuilder& b, const Value& x, const Value& y) {
  return b.op("stablehlo.and", {x, y}, x.shape);
}

Value b_or(FunctionBuilder& b, const Value& x, const Value& y) {
  return b.op("stablehlo.or", {x, y}, x.shape);
}

void register_reduction_rules(Registry& r) {
  r.add("sum", folding("stablehlo.add", 0),
        {"sum", "sum.dim_IntList", "sum.IntList_out", "sum.out"});
  r.add("prod", folding("stablehlo.multiply", 1), {"prod", "prod.dim_int", "prod.int_out",
                                                  "prod.out"});
  r.add("amax", extremum(true), {"amax", "amax.out", "max", "max.unary_out"});
  r.add("amin", extremum(false), {"amin", "amin.out", "min", "min.unary_out"});
  r.add("mean", mean, {"mean", "mean.dim", "mean.out", "mean.dtype_out"});
  r.add("any", boolean("stablehlo.or", false),
        {"any", "any.dim", "any.dims", "any.out", "any.dims_out", "any.all_out"});
  r.add("all", boolean("stablehlo.and", true),
        {"all", "all.dim", "all.dims", "all.out", "all.dims_out", "all.all_out"});
  r.add("max_dim", extremum_dim(true), {"max.dim", "max.dim_max"});
  r.add("min_dim", extremum_dim(false), {"min.dim", "min.dim_min"});
  r.add("argmax", arg_extremum(true), {"argmax", "argmax.out"});
  r.add("argmin", arg_extremum(false), {"argmin", "argmin.out"});
  r.add("var", variance(false), {"var.correction", "var.correction_out"});
  r.add("std", variance(true), {"std.correction", "std.correction_out"});
  r.add("var_mean", variance(false, true), {"var_mean.correction", "var_mean.correction_out"});
  r.add("std_mean", variance(true, true), {"std_mean.correction", "std_mean.correction_out"});
  r.add("logsumexp", logsumexp, {"logsumexp", "logsumexp.out"});
  r.add("cumsum", cumsum, {"cumsum", "cumsum.out", "cumsum_"});
  r.add("nonzero", nonzero);
  r.add("sort", sort, {"sort", "sort.stable", "sort.values", "sort.values_stable"});
  r.add("topk", topk, {"topk", "topk.values"});
  r.add("linalg_vector_norm", vector_norm, {"linalg_vector_norm", "linalg_vector_norm.out"});
}

}  // namespace torchtpu::lowering
