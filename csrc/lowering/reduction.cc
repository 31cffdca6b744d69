// Reductions. The output shape from PyTorch's meta function already says keepdim or not, so each
// rule reduces over its dimensions and reshapes to it.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

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
      "stablehlo.reduce", {x, index, init_v, init_i},
      {Shape{t, out}, Shape{ElementType::kS64, out}},
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
    // A complex input's variance is the mean squared distance from its (complex) mean.
    bool complex = hlo::is_complex(v[0].shape.type);
    ElementType xc = complex ? v[0].shape.type : c;
    Value x = convert(b, v[0], xc);
    Dims axes = reduction_dims(a, "dim", x.shape.rank());
    double n = static_cast<double>(count(x.shape.dims, axes));
    Value sum = reduce(b, x, axes, constant(b, xc, 0), "stablehlo.add");
    Value mu = keep_dims(b, binary(b, "stablehlo.divide", sum, full(b, xc, sum.shape.dims, n)),
                         x.shape.dims, axes);
    Value dev = binary(b, "stablehlo.subtract", x, broadcast_to(b, mu, x.shape.dims));
    Value squares;  // |dev|^2
    if (complex) {
      auto [re, im] = real_and_imag(b, dev);
      squares = binary(b, "stablehlo.add", binary(b, "stablehlo.multiply", re, re),
                       binary(b, "stablehlo.multiply", im, im));
    } else {
      squares = binary(b, "stablehlo.multiply", dev, dev);
    }
    Value sq = reduce(b, squares, axes, constant(b, c, 0), "stablehlo.add");
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
  // Shifted by the largest value (of a complex slice: the largest real part), as PyTorch.
  Value m = reduce_extreme(b, convert(b, x, real_part(c)), axes, true);
  // An all -inf slice keeps -inf (not NaN): shift by 0 there.
  Value finite = b.op("stablehlo.is_finite", {m}, Shape{ElementType::kPred, m.shape.dims});
  Value shift = convert(b, select(b, finite, m, full(b, m.shape.type, m.shape.dims, 0)), c);
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

// nonzero(self) with its count known (attrs shape [n, rank]), and nonzero_static(self, size,
// fill_value): the coordinates of the first n nonzero elements in row-major order, rows past the
// count holding fill_value.
Values nonzero(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  Dims shape = out_shape(a);
  int64_t n = shape[0], rank = shape[1], total = x.shape.numel();
  double fill = a.has("fill_value") ? static_cast<double>(a.i("fill_value")) : 0;
  if (total == 0 || n == 0 || rank == 0) return {full(b, ElementType::kS64, shape, fill)};
  Value mask = reshape(b, compare(b, x, full(b, x.shape.type, x.shape.dims, 0), "NE"), {total});
  Value position = binary(b, "stablehlo.subtract",
                          prefix_sum(b, convert(b, mask, ElementType::kS64), 0),
                          full(b, ElementType::kS64, {total}, 1));
  Value limit = full(b, ElementType::kS64, {total}, static_cast<double>(n));
  Value kept = b_and(b, mask, compare(b, position, limit, "LT"));
  Value target = select(b, kept, position, limit);
  std::vector<Value> columns;
  for (int64_t d = 0; d < rank; ++d) {
    columns.push_back(reshape(b, iota(b, ElementType::kS64, x.shape.dims, d), {total, 1}));
  }
  Value coords = concatenate(b, columns, 1);
  Shape scalar{ElementType::kS64, {}};
  Value rows = b.op_with_region(
      "stablehlo.scatter", {full(b, ElementType::kS64, {n + 1, rank}, fill),
                            reshape(b, target, {total, 1}), coords},
      {Shape{ElementType::kS64, {n + 1, rank}}}, {scalar, scalar},
      [](FunctionBuilder&, const std::vector<Value>& args) { return std::vector<Value>{args[1]}; },
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
      "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
      "indices_are_sorted = false, unique_indices = false")[0];
  return {slice(b, rows, {0, 0}, {n, rank})};
}

// The `ord`-norm of `x` over `axes`, in x's type: the norm of its modulus.
Value norm_over(FunctionBuilder& b, const Value& x, const Dims& axes, double ord) {
  ElementType c = x.shape.type;
  if (std::isinf(ord)) return reduce_extreme(b, x, axes, ord > 0);
  if (ord == 0) {
    Value nonzero = convert(b, compare(b, x, full(b, c, x.shape.dims, 0), "NE"), c);
    return reduce(b, nonzero, axes, constant(b, c, 0), "stablehlo.add");
  }
  if (ord == 1) return reduce(b, x, axes, constant(b, c, 0), "stablehlo.add");
  if (ord == 2) {
    return unary(b, "stablehlo.sqrt", reduce(b, binary(b, "stablehlo.multiply", x, x), axes,
                                             constant(b, c, 0), "stablehlo.add"));
  }
  Value p = full(b, c, x.shape.dims, ord);
  Value s = reduce(b, binary(b, "stablehlo.power", x, p), axes, constant(b, c, 0),
                   "stablehlo.add");
  return binary(b, "stablehlo.power", s, full(b, c, s.shape.dims, 1.0 / ord));
}

// linalg_vector_norm(self, ord, dim?, keepdim, dtype?) and norm(self, p?, dim, keepdim,
// dtype?): the order is a static attribute (2 when absent).
LoweringRule vector_norm(const std::string& order) {
  return [order](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    Value x = convert(b, modulus(b, v[0]), c);
    Dims axes = reduction_dims(a, "dim", x.shape.rank());
    double ord = a.has(order) ? a.f(order) : 2.0;
    return Values{convert(b, reshape(b, norm_over(b, x, axes, ord), out_shape(a)), t)};
  };
}

// renorm(self, p, dim, maxnorm): each slice along dim whose p-norm exceeds maxnorm is scaled
// down to it (by maxnorm / (norm + 1e-7), as PyTorch's kernel).
Values renorm(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  if (x.shape.numel() == 0) return {convert(b, x, t)};
  int64_t dim = normalize_dim(a.i("dim"), x.shape.rank());
  Dims axes;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.rank()); ++d) {
    if (d != dim) axes.push_back(d);
  }
  ElementType r = real_part(c);  // norms of complex slices are of their moduli
  Value norm = keep_dims(b, norm_over(b, modulus(b, x), axes, a.f("p")), x.shape.dims, axes);
  const Dims& nd = norm.shape.dims;
  Value maxnorm = splat(b, v[1], r, nd);
  Value factor = select(b, compare(b, norm, maxnorm, "GT"),
                        binary(b, "stablehlo.divide", maxnorm,
                               binary(b, "stablehlo.add", norm, full(b, r, nd, 1e-7))),
                        full(b, r, nd, 1));
  factor = convert(b, broadcast_to(b, factor, x.shape.dims), c);
  return {convert(b, binary(b, "stablehlo.multiply", x, factor), t)};
}

// nansum(self, dim?, keepdim, dtype?): NaNs count as zero.
Values nansum(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = t == ElementType::kPred ? t : opmath(t);
  Value x = convert(b, v[0], c);
  if (hlo::is_floating(c)) {
    x = select(b, compare(b, x, x, "NE"), full(b, c, x.shape.dims, 0), x);
  }
  Dims axes = reduction_dims(a, "dim", x.shape.rank());
  Value r = reduce(b, x, axes, constant(b, c, 0), "stablehlo.add");
  return {convert(b, reshape(b, r, out_shape(a)), t)};
}

// count_nonzero.dim_IntList(self, dim)
Values count_nonzero(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  Value nonzero = convert(b, compare(b, x, full(b, x.shape.type, x.shape.dims, 0), "NE"),
                          ElementType::kS64);
  Dims axes = reduction_dims(a, "dim", x.shape.rank());
  Value r = reduce(b, nonzero, axes, constant(b, ElementType::kS64, 0), "stablehlo.add");
  return {convert(b, reshape(b, r, out_shape(a)), out_type(a))};
}

// aminmax(self, dim?, keepdim) -> (min, max)
Values aminmax(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Dims axes = reduction_dims(a, "dim", v[0].shape.rank());
  return {reshape(b, reduce_extreme(b, v[0], axes, false), out_shape(a)),
          reshape(b, reduce_extreme(b, v[0], axes, true), out_shape(a, 1))};
}

// The largest finite value of a floating type.
double largest_finite(ElementType t) {
  switch (t) {
    case ElementType::kF16: return 65504.0;
    case ElementType::kBF16: return 3.3895313892515355e38;
    case ElementType::kF32: return 3.4028234663852886e38;
    default: return 1.7976931348623157e308;
  }
}

// nan_to_num(self, nan?, posinf?, neginf?): operands self, then the replacements given; an
// absent infinity's replacement is the type's largest (or lowest) finite value.
Values nan_to_num(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Value x = convert(b, v[0], t);
  if (!hlo::is_floating(t)) return {x};
  size_t next = 1;
  auto replacement = [&](const char* name, double fallback) {
    if (a.has(std::string(name) + "_absent")) return full(b, t, x.shape.dims, fallback);
    return splat(b, v[next++], t, x.shape.dims);
  };
  Value nan = replacement("nan", 0), posinf = replacement("posinf", largest_finite(t));
  Value neginf = replacement("neginf", -largest_finite(t));
  Value inf = full(b, t, x.shape.dims, std::numeric_limits<double>::infinity());
  Value r = select(b, compare(b, x, x, "NE"), nan, x);
  r = select(b, compare(b, x, inf, "EQ"), posinf, r);
  r = select(b, compare(b, x, unary(b, "stablehlo.negate", inf), "EQ"), neginf, r);
  return {r};
}

// The float64 bit pattern of each element of the float `x`, built from its own bits as a C++
// cast to double makes it: subnormals kept (XLA's CPU convert flushes them to zero), NaNs
// quieted with their payload kept.
Value float64_bits(FunctionBuilder& b, const Value& x) {
  ElementType t = x.shape.type;
  if (t == ElementType::kF64) return bitcast(b, x, ElementType::kU64);
  const int64_t mantissa = t == ElementType::kF32 ? 23 : t == ElementType::kBF16 ? 7 : 10;
  const int64_t exponent = t == ElementType::kF16 ? 5 : 8;
  const int64_t bias = (int64_t{1} << (exponent - 1)) - 1;
  const Dims& d = x.shape.dims;
  auto k = [&](int64_t value) { return int_full(b, ElementType::kU64, d, value); };
  auto op = [&](const char* name, const Value& l, const Value& r) { return binary(b, name, l, r); };
  Value u =
      convert(b, bitcast(b, x, t == ElementType::kF32 ? ElementType::kU32 : ElementType::kU16),
              ElementType::kU64);
  Value sign = op("stablehlo.shift_left",
                  op("stablehlo.shift_right_logical", u, k(exponent + mantissa)), k(63));
  Value e = op("stablehlo.and", op("stablehlo.shift_right_logical", u, k(mantissa)),
               k((int64_t{1} << exponent) - 1));
  Value m = op("stablehlo.and", u, k((int64_t{1} << mantissa) - 1));
  Value widen = k(52 - mantissa);
  Value normal =
      op("stablehlo.or", op("stablehlo.shift_left", op("stablehlo.add", e, k(1023 - bias)), k(52)),
         op("stablehlo.shift_left", m, widen));
  Value nonzero_m = compare(b, m, k(0), "NE");
  Value quiet = select(b, nonzero_m, op("stablehlo.or", m, k(int64_t{1} << (mantissa - 1))), m);
  Value special =
      op("stablehlo.or", k(int64_t{0x7FF} << 52), op("stablehlo.shift_left", quiet, widen));
  // A subnormal's leading bit p becomes the implicit one: exponent p + 1 - bias - mantissa.
  Value p = op("stablehlo.subtract", k(63), unary(b, "stablehlo.count_leading_zeros", m));
  Value subnormal =
      op("stablehlo.or",
         op("stablehlo.shift_left", op("stablehlo.add", p, k(1024 - bias - mantissa)), k(52)),
         op("stablehlo.and", op("stablehlo.shift_left", m, op("stablehlo.subtract", k(52), p)),
            k((int64_t{1} << 52) - 1)));
  Value zero_e = compare(b, e, k(0), "EQ");
  Value top_e = compare(b, e, k((int64_t{1} << exponent) - 1), "EQ");
  Value bits =
      select(b, zero_e, select(b, nonzero_m, subnormal, k(0)), select(b, top_e, special, normal));
  return op("stablehlo.or", sign, bits);
}

// hash_tensor(self, dim, keepdim, mode): mode 0, the only one, xor-folds each element's 64 bits as
// the CPU's kernel casts it to uint64: floats through float64's bit pattern, signed integers
// sign-extended, unsigned ones and bools zero-extended.
Values hash_tensor(FunctionBuilder& b, const Values& v, const Attrs& a) {
  int64_t mode = a.i("mode");
  if (mode != 0) throw std::runtime_error("Unknown hash_tensor mode: " + std::to_string(mode));
  ElementType t = v[0].shape.type;
  if (hlo::is_complex(t)) {
    throw Refused(std::string("\"xor_sum_tpu\" not implemented for '") +
                  (t == ElementType::kC64 ? "ComplexFloat" : "ComplexDouble") + "'");
  }
  Value bits = hlo::is_floating(t) ? float64_bits(b, v[0])
               : hlo::is_signed_integer(t)
                   ? bitcast(b, convert(b, v[0], ElementType::kS64), ElementType::kU64)
                   : convert(b, v[0], ElementType::kU64);
  Dims axes = reduction_dims(a, "dim", bits.shape.rank());
  Value r = reduce(b, bits, axes, constant(b, ElementType::kU64, 0), "stablehlo.xor");
  return {reshape(b, r, out_shape(a))};
}

// trace(self): the sum of a matrix's diagonal.
Values trace(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  const Dims& d = x.shape.dims;
  Value diagonal = compare(b, iota(b, ElementType::kS64, d, 0), iota(b, ElementType::kS64, d, 1),
                           "EQ");
  Value r = reduce(b, select(b, diagonal, x, full(b, c, d, 0)), {0, 1}, constant(b, c, 0),
                   "stablehlo.add");
  return {convert(b, r, t)};
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
  r.add("nonzero", nonzero, {"nonzero_static", "nonzero_static.out"});
  r.add("linalg_vector_norm", vector_norm("ord"),
        {"linalg_vector_norm", "linalg_vector_norm.out"});
  r.add("norm", vector_norm("p"),
        {"norm.ScalarOpt_dim", "norm.ScalarOpt_dim_dtype", "norm.out", "norm.dtype_out",
         "norm.Scalar", "norm.ScalarOpt_dtype", "norm.Scalar_out", "norm.ScalarOpt_dtype_out"});
  r.add("renorm", renorm, {"renorm", "renorm.out", "renorm_"});
  r.add("nansum", nansum, {"nansum", "nansum.out"});
  r.add("count_nonzero", count_nonzero,
        {"count_nonzero.dim_IntList", "count_nonzero.dim_IntList_out"});
  r.add("aminmax", aminmax, {"aminmax", "aminmax.out"});
  r.add("nan_to_num", nan_to_num, {"nan_to_num", "nan_to_num.out", "nan_to_num_"});
  r.add("trace", trace, {"trace", "trace.out"});
  r.add("hash_tensor", hash_tensor, {"hash_tensor", "hash_tensor.out"});
}

}  // namespace torchtpu::lowering
