// Elementwise math beyond arithmetic: unary functions, comparisons, logic, selection, activations
// and their gradients. Operands arrive in their own dtypes; outputs are in PyTorch's (attrs).
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

bool integral(ElementType t) { return !hlo::is_floating(t) && !hlo::is_complex(t); }

// Operand i converted to `type` and broadcast to the output shape.
Value arg(FunctionBuilder& b, const Values& v, size_t i, ElementType type, const Attrs& a) {
  return promote(b, v.at(i), type, out_shape(a));
}

Value full_like(FunctionBuilder& b, const Value& x, double value) {
  return full(b, x.shape.type, x.shape.dims, value);
}

// f(x) in opmath(output type), for functions whose output dtype PyTorch already chose.
LoweringRule unary_fn(std::function<Value(FunctionBuilder&, const Value&)> f) {
  return [f](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a);
    return Values{convert(b, f(b, arg(b, v, 0, opmath(t), a)), t)};
  };
}

LoweringRule unary_op(const std::string& op) {
  return unary_fn([op](FunctionBuilder& b, const Value& x) { return unary(b, op, x); });
}

// Rounding functions are the identity on integers.
LoweringRule rounding(const std::string& op) {
  return unary_fn([op](FunctionBuilder& b, const Value& x) {
    return integral(x.shape.type) ? x : unary(b, op, x);
  });
}

// f(x, y) of operands promoted to the computation type, result converted to the output type.
LoweringRule binary_fn(std::function<Value(FunctionBuilder&, const Value&, const Value&)> f) {
  return [f](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType c = opmath(compute_type(a));
    return Values{convert(b, f(b, arg(b, v, 0, c, a), arg(b, v, 1, c, a)), out_type(a))};
  };
}

LoweringRule binary_op(const std::string& op) {
  return binary_fn(
      [op](FunctionBuilder& b, const Value& x, const Value& y) { return binary(b, op, x, y); });
}

LoweringRule comparison(const std::string& direction) {
  return [direction](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType c = compute_type(a);
    return Values{convert(b, compare(b, arg(b, v, 0, c, a), arg(b, v, 1, c, a), direction),
                          out_type(a))};
  };
}

LoweringRule logical(const std::string& op) {
  return [op](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = arg(b, v, 0, ElementType::kPred, a), y = arg(b, v, 1, ElementType::kPred, a);
    return Values{convert(b, binary(b, op, x, y), out_type(a))};
  };
}

// A predicate of the input's own values (isnan, isinf, ...).
LoweringRule predicate(std::function<Value(FunctionBuilder&, const Value&)> f,
                       bool integer_answer) {
  return [f, integer_answer](FunctionBuilder& b, const Values& v, const Attrs& a) {
    const Value& x = v[0];
    if (integral(x.shape.type)) {
      return Values{full(b, ElementType::kPred, out_shape(a), integer_answer)};
    }
    return Values{f(b, x)};
  };
}

// XLA's erf stops a few ulp short of +-1 in float32 (erf(7) = 1 - 1.8e-7 on the CPU plugin), so
// 1 + erf(x) (gelu, ndtr) grew with -x where it is 0 on the CPU (gelu(-1e4) was -8.9e-4). From
// |x| = 1 on, erf is 1 - erfc(|x|), with its sign: exact to rounding there.
Value erf(FunctionBuilder& b, const Value& x) {
  Value magnitude = unary(b, "stablehlo.abs", x);
  Value tail = binary(b, "stablehlo.subtract", full_like(b, x, 1),
                      unary(b, "chlo.erfc", magnitude));
  tail = binary(b, "stablehlo.multiply", unary(b, "stablehlo.sign", x), tail);
  return select(b, compare(b, magnitude, full_like(b, x, 1), "GT"), tail,
                unary(b, "chlo.erf", x));
}

Value extreme_like(FunctionBuilder& b, const Value& x, bool largest) {
  return broadcast_in_dim(b, extreme(b, x.shape.type, largest), x.shape.dims, {});
}

// gelu: x * Φ(x), exactly or with PyTorch's tanh approximation.
Value gelu(FunctionBuilder& b, const Value& x, bool tanh_approximation) {
  Value half = full_like(b, x, 0.5), one = full_like(b, x, 1.0);
  if (tanh_approximation) {
    Value x3 = binary(b, "stablehlo.multiply", binary(b, "stablehlo.multiply", x, x), x);
    Value inner = binary(b, "stablehlo.add", x,
                         binary(b, "stablehlo.multiply", full_like(b, x, 0.044715), x3));
    inner = binary(b, "stablehlo.multiply", full_like(b, x, std::sqrt(2.0 / M_PI)), inner);
    Value t = binary(b, "stablehlo.add", one, unary(b, "stablehlo.tanh", inner));
    return binary(b, "stablehlo.multiply", binary(b, "stablehlo.multiply", half, x), t);
  }
  Value cdf = binary(b, "stablehlo.multiply", half,
                     binary(b, "stablehlo.add", one,
                            erf(b, binary(b, "stablehlo.multiply", x,
                                          full_like(b, x, M_SQRT1_2)))));
  return binary(b, "stablehlo.multiply", x, cdf);
}

bool tanh_approximation(const Attrs& a) {
  return a.has("approximate") && a.s("approximate") == "tanh";
}

Values gelu_rule(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  return {convert(b, gelu(b, arg(b, v, 0, opmath(t), a), tanh_approximation(a)), t)};
}

// operands: grad_output, self.
Values gelu_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = arg(b, v, 0, c, a), x = arg(b, v, 1, c, a);
  auto mul = [&](const Value& p, const Value& q) { return binary(b, "stablehlo.multiply", p, q); };
  auto add = [&](const Value& p, const Value& q) { return binary(b, "stablehlo.add", p, q); };
  Value half = full_like(b, x, 0.5), one = full_like(b, x, 1.0);
  Value derivative;
  if (tanh_approximation(a)) {
    Value k = full_like(b, x, std::sqrt(2.0 / M_PI)), c3 = full_like(b, x, 0.044715);
    Value x2 = mul(x, x);
    Value inner = mul(k, add(x, mul(c3, mul(x2, x))));
    Value t = unary(b, "stablehlo.tanh", inner);
    Value left = mul(half, add(one, t));
    Value dinner = mul(k, add(one, mul(full_like(b, x, 3 * 0.044715), x2)));
    Value right = mul(mul(mul(half, x), binary(b, "stablehlo.subtract", one, mul(t, t))), dinner);
    derivative = add(left, right);
  } else {
    Value cdf = mul(half, add(one, erf(b, mul(x, full_like(b, x, M_SQRT1_2)))));
    Value pdf = mul(full_like(b, x, 0.5 * M_2_SQRTPI * M_SQRT1_2),
                    unary(b, "stablehlo.exponential", mul(full_like(b, x, -0.5), mul(x, x))));
    derivative = add(cdf, mul(x, pdf));
  }
  return {convert(b, mul(g, derivative), t)};
}

Value sigmoid(FunctionBuilder& b, const Value& x) { return unary(b, "stablehlo.logistic", x); }

// operands: grad_output, self.
Values silu_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = arg(b, v, 0, c, a), x = arg(b, v, 1, c, a);
  Value s = sigmoid(b, x), one = full_like(b, x, 1.0);
  Value d = binary(b, "stablehlo.multiply", s,
                   binary(b, "stablehlo.add", one,
                          binary(b, "stablehlo.multiply", x,
                                 binary(b, "stablehlo.subtract", one, s))));
  return {convert(b, binary(b, "stablehlo.multiply", g, d), t)};
}

// operands: grad_output, output.
Values sigmoid_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = arg(b, v, 0, c, a), y = arg(b, v, 1, c, a);
  Value d = binary(b, "stablehlo.multiply", y,
                   binary(b, "stablehlo.subtract", full_like(b, y, 1.0), y));
  return {convert(b, binary(b, "stablehlo.multiply", g, d), t)};
}

Values tanh_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = arg(b, v, 0, c, a), y = arg(b, v, 1, c, a);
  Value d = binary(b, "stablehlo.subtract", full_like(b, y, 1.0),
                   binary(b, "stablehlo.multiply", y, y));
  return {convert(b, binary(b, "stablehlo.multiply", g, d), t)};
}

// operands: grad_output, self, threshold: the gradient where self > threshold, else 0.
Values threshold_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = compute_type(a);
  Value g = arg(b, v, 0, t, a), x = arg(b, v, 1, c, a), th = arg(b, v, 2, c, a);
  return {select(b, compare(b, x, th, "LE"), full_like(b, g, 0), g)};
}

// operands: self, negative_slope.
Values leaky_relu(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = arg(b, v, 0, c, a), slope = arg(b, v, 1, c, a);
  Value positive = compare(b, x, full_like(b, x, 0), "GT");
  return {convert(b, select(b, positive, x, binary(b, "stablehlo.multiply", x, slope)), t)};
}

// operands: grad_output, self, negative_slope.
Values leaky_relu_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = arg(b, v, 0, c, a), x = arg(b, v, 1, c, a), slope = arg(b, v, 2, c, a);
  Value positive = compare(b, x, full_like(b, x, 0), "GT");
  return {convert(b, select(b, positive, g, binary(b, "stablehlo.multiply", g, slope)), t)};
}

// where(condition, self, other)
Values where(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  return {select(b, arg(b, v, 0, ElementType::kPred, a), arg(b, v, 1, t, a), arg(b, v, 2, t, a))};
}

// masked_fill(self, mask, value)
Values masked_fill(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  return {select(b, arg(b, v, 1, ElementType::kPred, a), arg(b, v, 2, t, a), arg(b, v, 0, t, a))};
}

// clamp(self, min?, max?): operands are self then whichever bounds are present.
Values clamp(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType c = opmath(compute_type(a));
  Value x = arg(b, v, 0, c, a);
  size_t next = 1;
  bool has_min = !a.has("min_absent"), has_max = !a.has("max_absent");
  if (has_min) x = maximum(b, x, arg(b, v, next++, c, a));
  if (has_max) x = minimum(b, x, arg(b, v, next++, c, a));
  return {convert(b, x, out_type(a))};
}

// addcmul / addcdiv(self, tensor1, tensor2, value): self + value * (t1 ∘ t2)
LoweringRule addc(const std::string& op) {
  return [op](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType c = opmath(compute_type(a));
    Value prod = binary(b, op, arg(b, v, 1, c, a), arg(b, v, 2, c, a));
    Value scaled = binary(b, "stablehlo.multiply", arg(b, v, 3, c, a), prod);
    return Values{convert(b, binary(b, "stablehlo.add", arg(b, v, 0, c, a), scaled), out_type(a))};
  };
}

// lerp(self, end, weight), as PyTorch: exact at both ends.
Values lerp(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  if (!hlo::is_floating(t) && !hlo::is_complex(t)) {
    throw Refused(std::string("\"lerp_kernel_") + (v[2].shape.rank() == 0 ? "scalar" : "tensor") +
                  "\" not implemented for '" + scalar_type_name(t) + "'");
  }
  ElementType c = opmath(t);
  Value x = arg(b, v, 0, c, a), y = arg(b, v, 1, c, a), w = arg(b, v, 2, c, a);
  Value diff = binary(b, "stablehlo.subtract", y, x);
  Value low = binary(b, "stablehlo.add", x, binary(b, "stablehlo.multiply", w, diff));
  Value high = binary(b, "stablehlo.subtract", y,
                      binary(b, "stablehlo.multiply", diff,
                             binary(b, "stablehlo.subtract", full_like(b, w, 1), w)));
  Value small = compare(b, modulus(b, w), full(b, real_part(c), w.shape.dims, 0.5), "LT");
  return {convert(b, select(b, small, low, high), out_type(a))};
}

// Python's remainder: the result has the divisor's sign.
Value python_remainder(FunctionBuilder& b, const Value& x, const Value& y) {
  Value r = binary(b, "stablehlo.remainder", x, y);
  Value zero = full_like(b, r, 0);
  Value signs_differ = compare(b, compare(b, r, zero, "LT"), compare(b, y, zero, "LT"), "NE");
  Value adjust = b.op("stablehlo.and", {compare(b, r, zero, "NE"), signs_differ},
                      signs_differ.shape);
  return select(b, adjust, binary(b, "stablehlo.add", r, y), r);
}

Value relu(FunctionBuilder& b, const Value& x) { return maximum(b, x, full_like(b, x, 0)); }

Value silu(FunctionBuilder& b, const Value& x) {
  return binary(b, "stablehlo.multiply", x, sigmoid(b, x));
}

// PyTorch's sign of a float is (0 < x) - (x < 0): 0 for NaN, and +0 for -0.
Value sign(FunctionBuilder& b, const Value& x) {
  if (x.shape.type == ElementType::kPred) return x;
  if (!hlo::is_floating(x.shape.type)) return unary(b, "stablehlo.sign", x);
  Value zero = full_like(b, x, 0);
  return binary(b, "stablehlo.subtract", convert(b, compare(b, x, zero, "GT"), x.shape.type),
                convert(b, compare(b, x, zero, "LT"), x.shape.type));
}

// x << y and x >> y (arithmetic for signed types), as PyTorch: shifts past the width give 0
// (or -1 for negative x shifted right).
LoweringRule shift(bool left) {
  return binary_fn([left](FunctionBuilder& b, const Value& x, const Value& y) {
    ElementType t = x.shape.type;
    const char* op = left ? "stablehlo.shift_left"
                          : hlo::is_signed_integer(t) ? "stablehlo.shift_right_arithmetic"
                                                      : "stablehlo.shift_right_logical";
    return binary(b, op, x, y);
  });
}

// f(x, y) in opmath(output type): for ops whose integer inputs give a float result.
LoweringRule float_binary_fn(std::function<Value(FunctionBuilder&, const Value&, const Value&)> f) {
  return [f](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType c = opmath(out_type(a));
    return Values{convert(b, f(b, arg(b, v, 0, c, a), arg(b, v, 1, c, a)), out_type(a))};
  };
}

Value trunc(FunctionBuilder& b, const Value& x) {
  if (integral(x.shape.type)) return x;
  Value negative = compare(b, x, full_like(b, x, 0), "LT");
  return select(b, negative, unary(b, "stablehlo.ceil", x), unary(b, "stablehlo.floor", x));
}

// fmax / fmin: a NaN loses to a number (unlike maximum / minimum).
Value ignoring_nan(FunctionBuilder& b, const Value& x, const Value& y, const Value& r) {
  if (!hlo::is_floating(x.shape.type)) return r;
  return select(b, is_nan(b, x), y, select(b, is_nan(b, y), x, r));
}

// copysign: |x| with the sign bit of y (so -0.0 and -NaN count as negative).
Value copysign(FunctionBuilder& b, const Value& x, const Value& y) {
  Value magnitude = unary(b, "stablehlo.abs", x);
  return select(b, sign_bit(b, y), unary(b, "stablehlo.negate", magnitude), magnitude);
}

// XLA's complex sqrt and inverse trigonometric and hyperbolic functions put a result on the
// wrong side of a branch cut when the input lies on it with a negative zero (sqrt(-1 - 0i) was +i
// where the CPU, as C99, gives -i), and give zeros of the wrong sign. Each function's symmetry
// names the sign of each part of its result: f(conj z) = conj f(z) makes the imaginary part take
// z's (acos's the opposite), oddness makes the real part take z's (asin, asinh, atan, atanh);
// sqrt, acos and acosh keep their real parts, which are never negative.
struct BranchSigns {
  bool real_of_real;
  int imag_of_imag;  // 1: z's sign, -1: the opposite
};

const std::map<std::string, BranchSigns>& branch_signs() {
  static const std::map<std::string, BranchSigns> signs = {
      {"sqrt", {false, 1}}, {"acosh", {false, 1}}, {"acos", {false, -1}},
      {"asin", {true, 1}},  {"asinh", {true, 1}},  {"atan", {true, 1}},
      {"atanh", {true, 1}}};
  return signs;
}

Value on_its_branch(FunctionBuilder& b, const Value& z, const Value& r, BranchSigns signs) {
  auto [zr, zi] = real_and_imag(b, z);
  auto [rr, ri] = real_and_imag(b, r);
  Value imag_sign = signs.imag_of_imag < 0 ? unary(b, "stablehlo.negate", zi) : zi;
  Value re = signs.real_of_real ? copysign(b, rr, zr) : rr;
  return make_complex(b, re, copysign(b, ri, imag_sign), r.shape.type);
}

// Where a part of a complex function's input is NaN or infinite, XLA's expansions drop a NaN or
// make one up (log(1 + NaN i) had a finite real part, exp(-inf + NaN i) was NaN + NaN i, not 0;
// cos(inf i) was inf + NaN i, not inf - 0i, as 0 * inf is NaN in its sums). C99's Annex G, which
// the CPU follows, gives NaN in both parts where a part is NaN, and for a few rows, each naming the
// class of each part of the input, another value for each result part.
enum class Class { kNan, kZero, kInf, kPlusInf, kMinusInf, kFiniteNonzero };
enum class Sign { kOwn, kOfRe, kOfIm, kAgainstIm, kAgainstProduct };
struct Part {
  double value;  // NaN: a NaN
  Sign sign;     // the value's own sign, an input part's, the opposite of the imaginary part's,
                 // or the opposite of the product of both parts' signs
};
struct SpecialRow {
  Class re, im;  // the input's parts
  Part result_re, result_im;
};

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInfinity = std::numeric_limits<double>::infinity();
const Part kNanPart{kNan, Sign::kOwn};

Value in_class(FunctionBuilder& b, const Value& x, Class c) {
  auto is = [&](double value, const char* direction) {
    return compare(b, x, full_like(b, x, value), direction);
  };
  Value magnitude = unary(b, "stablehlo.abs", x);
  switch (c) {
    case Class::kNan: return is_nan(b, x);
    case Class::kZero: return is(0, "EQ");
    case Class::kInf: return compare(b, magnitude, full_like(b, x, kInfinity), "EQ");
    case Class::kPlusInf: return is(kInfinity, "EQ");
    case Class::kMinusInf: return is(-kInfinity, "EQ");
    case Class::kFiniteNonzero:
      return b_and(b, is(0, "NE"), compare(b, magnitude, full_like(b, x, kInfinity), "LT"));
  }
  throw std::logic_error("in_class: unknown class");
}

Value row_part(FunctionBuilder& b, const Value& x, const Value& y, Part part) {
  Value value = full_like(b, x, part.value);
  if (std::isnan(part.value)) return value;
  auto negate = [&](const Value& v) { return unary(b, "stablehlo.negate", v); };
  switch (part.sign) {
    case Sign::kOwn: return value;
    case Sign::kOfRe: return copysign(b, value, x);
    case Sign::kOfIm: return copysign(b, value, y);
    case Sign::kAgainstIm: return copysign(b, value, negate(y));
    case Sign::kAgainstProduct:
      return select(b, compare(b, sign_bit(b, x), sign_bit(b, y), "NE"), value, negate(value));
  }
  throw std::logic_error("row_part: unknown sign");
}

Value with_special_rows(FunctionBuilder& b, const Value& z, const Value& r,
                        const std::vector<SpecialRow>& rows) {
  auto [x, y] = real_and_imag(b, z);
  auto [r_re, r_im] = real_and_imag(b, r);
  Value nan = full_like(b, x, kNan), any_nan = b_or(b, is_nan(b, x), is_nan(b, y));
  Value re = select(b, any_nan, nan, r_re), im = select(b, any_nan, nan, r_im);
  for (const SpecialRow& row : rows) {
    Value here = b_and(b, in_class(b, x, row.re), in_class(b, y, row.im));
    re = select(b, here, row_part(b, x, y, row.result_re), re);
    im = select(b, here, row_part(b, x, y, row.result_im), im);
  }
  return make_complex(b, re, im, z.shape.type);
}

// Each complex function's rows (a function not named has none). The trigonometric ones follow
// from the hyperbolic ones by sin(z) = -i sinh(iz) and cos(z) = cosh(iz); where C99 leaves a sign
// or a value open, the row gives the CPU's.
const std::map<std::string, std::vector<SpecialRow>>& special_rows() {
  using C = Class;
  using S = Sign;
  const Part inf{kInfinity, S::kOwn}, zero{0, S::kOwn}, nan = kNanPart;
  const Part half_pi{M_PI / 2, S::kOwn};
  static const std::map<std::string, std::vector<SpecialRow>> rows = {
      {"log", {{C::kInf, C::kNan, inf, nan}, {C::kNan, C::kInf, inf, nan}}},
      {"exp", {{C::kPlusInf, C::kNan, inf, nan},
               {C::kMinusInf, C::kNan, zero, {0, S::kOfIm}},  // the NaN's sign, as glibc
               {C::kNan, C::kZero, nan, {0, S::kOfIm}},
               {C::kPlusInf, C::kInf, inf, nan},
               {C::kMinusInf, C::kInf, zero, {0, S::kOfIm}}}},
      {"sqrt", {{C::kPlusInf, C::kNan, inf, nan},
                {C::kMinusInf, C::kNan, nan, inf},
                {C::kNan, C::kInf, inf, {kInfinity, S::kOfIm}}}},
      {"sin", {{C::kZero, C::kNan, {0, S::kOfRe}, nan},
               {C::kNan, C::kZero, nan, {0, S::kOfIm}},
               {C::kNan, C::kInf, nan, inf},
               {C::kInf, C::kZero, nan, {0, S::kOfIm}},
               {C::kInf, C::kInf, nan, inf}}},
      {"cos", {{C::kZero, C::kNan, nan, {0, S::kOfRe}},
               {C::kNan, C::kZero, nan, zero},
               {C::kNan, C::kInf, inf, nan},
               {C::kZero, C::kInf, inf, {0, S::kAgainstProduct}},
               {C::kInf, C::kZero, nan, zero},
               {C::kInf, C::kInf, inf, nan}}},
      {"tan", {{C::kZero, C::kNan, {0, S::kOfRe}, nan},
               {C::kNan, C::kZero, nan, {0, S::kOfIm}},
               {C::kNan, C::kInf, zero, {1, S::kOfIm}},
               {C::kInf, C::kZero, nan, {0, S::kOfIm}},
               {C::kInf, C::kInf, {0, S::kOfRe}, {1, S::kOfIm}}}},
      {"sinh", {{C::kZero, C::kNan, {0, S::kOfRe}, nan},
                {C::kInf, C::kNan, inf, nan},
                {C::kNan, C::kZero, nan, {0, S::kOfIm}},
                {C::kZero, C::kInf, {0, S::kOfRe}, nan},
                {C::kInf, C::kInf, inf, nan}}},
      {"cosh", {{C::kZero, C::kNan, nan, zero},
                {C::kInf, C::kNan, inf, nan},
                {C::kNan, C::kZero, nan, {0, S::kOfIm}},
                {C::kZero, C::kInf, nan, zero},
                {C::kInf, C::kInf, inf, nan}}},
      {"tanh", {{C::kZero, C::kNan, {0, S::kOfRe}, nan},
                {C::kInf, C::kNan, {1, S::kOfRe}, zero},
                {C::kNan, C::kZero, nan, {0, S::kOfIm}},
                {C::kZero, C::kInf, {0, S::kOfRe}, nan},
                {C::kInf, C::kInf, {1, S::kOfRe}, {0, S::kOfIm}}}},
      {"sigmoid", {{C::kPlusInf, C::kNan, {1, S::kOwn}, zero},
                   {C::kPlusInf, C::kInf, {1, S::kOwn}, zero},
                   {C::kMinusInf, C::kFiniteNonzero, nan, nan}}},
      {"asin", {{C::kZero, C::kNan, {0, S::kOfRe}, nan},
                {C::kInf, C::kNan, nan, inf},
                {C::kNan, C::kInf, nan, {kInfinity, S::kOfIm}}}},
      {"acos", {{C::kZero, C::kNan, half_pi, nan},
                {C::kInf, C::kNan, nan, {-kInfinity, S::kOwn}},
                {C::kNan, C::kInf, nan, {kInfinity, S::kAgainstIm}}}},
      {"atan", {{C::kInf, C::kNan, {M_PI / 2, S::kOfRe}, zero},
                {C::kNan, C::kZero, nan, {0, S::kOfIm}},
                {C::kNan, C::kInf, nan, {0, S::kOfIm}}}},
      {"asinh", {{C::kInf, C::kNan, {kInfinity, S::kOfRe}, nan},
                 {C::kNan, C::kZero, nan, {0, S::kOfIm}},
                 {C::kNan, C::kInf, inf, nan}}},
      {"acosh", {{C::kZero, C::kNan, nan, half_pi},
                 {C::kInf, C::kNan, inf, nan},
                 {C::kNan, C::kInf, inf, nan}}},
      {"atanh", {{C::kZero, C::kNan, {0, S::kOfRe}, nan},
                 {C::kInf, C::kNan, {0, S::kOfRe}, nan},
                 {C::kNan, C::kInf, zero, {M_PI / 2, S::kOfIm}}}},
      {"log1p", {}},
      {"expm1", {}},
      {"reciprocal", {}},
  };
  return rows;
}

// Where a part of a complex function's input is a zero, a part of its result is a product with
// a zero factor (sin(x + 0i) = sin x cosh 0 + i cos x sinh 0): a zero whose sign is the product of
// the factors' signs, as on the CPU (C99). XLA's expansions lost the sign (exp(1 - 0i) was
// e + 0i, the CPU's e - 0i) or, where the other factor overflowed, made a NaN of it (sin(100i) in
// float32 was NaN + inf i, the CPU's 0 + inf i). Functions not named keep XLA's result.
Value with_zero_parts(FunctionBuilder& b, const std::string& name, const Value& z, const Value& r) {
  static const std::set<std::string> named = {"exp",  "expm1", "sin",  "cos",  "tan",
                                              "sinh", "cosh",  "tanh", "log1p"};
  if (!named.count(name)) return r;
  auto [x, y] = real_and_imag(b, z);
  auto [re, im] = real_and_imag(b, r);
  Value zero = full_like(b, x, 0);
  Value x_zero = compare(b, x, zero, "EQ"), y_zero = compare(b, y, zero, "EQ");
  Value x_neg = sign_bit(b, x), y_neg = sign_bit(b, y);
  auto unequal = [&](const Value& p, const Value& q) { return compare(b, p, q, "NE"); };
  auto negative_of = [&](const char* op, const Value& v) { return sign_bit(b, unary(b, op, v)); };
  // A zero, negative where `negative` holds; `flip` negates it.
  auto signed_zero = [&](const Value& negative, bool flip = false) {
    Value minus = unary(b, "stablehlo.negate", zero);
    return flip ? select(b, negative, zero, minus) : select(b, negative, minus, zero);
  };
  if (name == "exp" || name == "tan" || name == "tanh") {  // sin y (or sinh 2y) times a positive
    im = select(b, y_zero, signed_zero(y_neg), im);
  }
  if (name == "tan" || name == "tanh") re = select(b, x_zero, signed_zero(x_neg), re);
  if (name == "expm1") {  // expm1(x) and exp(x) sin y, the CPU's product (NaN where exp(x) is inf)
    re = select(b, y_zero, unary(b, "stablehlo.exponential_minus_one", x), re);
    im = select(b, y_zero, binary(b, "stablehlo.multiply", unary(b, "stablehlo.exponential", x), y),
                im);
  }
  if (name == "sinh") {  // sinh x cos y + i cosh x sin y
    re = select(b, x_zero, signed_zero(unequal(x_neg, negative_of("stablehlo.cosine", y))), re);
    im = select(b, y_zero, signed_zero(y_neg), im);
  }
  if (name == "cosh") {  // cosh x cos y + i sinh x sin y
    im = select(b, y_zero, signed_zero(unequal(x_neg, y_neg)), im);
    im = select(b, x_zero, signed_zero(unequal(x_neg, negative_of("stablehlo.sine", y))), im);
  }
  if (name == "sin") {  // sin x cosh y + i cos x sinh y
    re = select(b, x_zero, signed_zero(x_neg), re);
    im = select(b, y_zero, signed_zero(unequal(negative_of("stablehlo.cosine", x), y_neg)), im);
  }
  if (name == "cos") {  // cos x cosh y - i sin x sinh y
    im = select(b, y_zero, signed_zero(unequal(negative_of("stablehlo.sine", x), y_neg), true),
                im);
    im = select(b, x_zero, signed_zero(unequal(x_neg, y_neg), true), im);
  }
  if (name == "log1p") {  // log1p(z) = z at z = 0
    Value both = b_and(b, x_zero, y_zero);
    re = select(b, both, x, re);
    im = select(b, both, y, im);
  }
  return make_complex(b, re, im, z.shape.type);
}

Value reciprocal(FunctionBuilder& b, const Value& x) {
  Value y = divide(b, full_like(b, x, 1), x);
  if (!hlo::is_complex(x.shape.type)) return y;
  return with_special_rows(b, x, y, special_rows().at("reciprocal"));
}

// The plugin's `op` of x, and of a complex x, on its branch (`branch_signs`) and NaN where the
// CPU has it (`special_rows`).
Value complex_aware(FunctionBuilder& b, const std::string& name, const std::string& op,
                    const Value& x) {
  if (name == "rsqrt" && hlo::is_complex(x.shape.type)) {  // as the CPU: 1 / sqrt(x)
    return reciprocal(b, complex_aware(b, "sqrt", "stablehlo.sqrt", x));
  }
  Value y = unary(b, op, x);
  if (!hlo::is_complex(x.shape.type)) return y;
  auto signs = branch_signs().find(name);
  if (signs != branch_signs().end()) y = on_its_branch(b, x, y, signs->second);
  y = with_zero_parts(b, name, x, y);
  auto rows = special_rows().find(name);
  return rows == special_rows().end() ? y : with_special_rows(b, x, y, rows->second);
}

// log(x) / log(base); of a complex x, each part divided (a complex division by log(base) + 0i
// made log10(0) -inf + NaN i where the CPU gives -inf + 0i).
Value log_base(FunctionBuilder& b, const Value& x, double base) {
  Value log = complex_aware(b, "log", "stablehlo.log", x);
  if (!hlo::is_complex(x.shape.type)) {
    return binary(b, "stablehlo.divide", log, full_like(b, x, std::log(base)));
  }
  auto [re, im] = real_and_imag(b, log);
  Value scale = full_like(b, re, std::log(base));
  return make_complex(b, binary(b, "stablehlo.divide", re, scale),
                      binary(b, "stablehlo.divide", im, scale), x.shape.type);
}

// z w of complex values as C99's Annex G multiplies (glibc's __muldc3): where both parts of
// the plain product are NaN and a factor is infinite (or a partial product overflowed), the
// infinite parts count as +-1, the others as +-0 (NaN ones too), and the product is scaled by
// infinity: (inf + 0i)(0 + inf i) is inf i, not NaN + NaN i.
Value c99_multiply(FunctionBuilder& b, const Value& z, const Value& w) {
  auto [a, c_b] = real_and_imag(b, z);
  auto [c, d] = real_and_imag(b, w);
  Value bb = c_b;
  auto mul = [&](const Value& u, const Value& v) { return binary(b, "stablehlo.multiply", u, v); };
  auto inf = [&](const Value& v) {
    return compare(b, unary(b, "stablehlo.abs", v), full_like(b, v, kInfinity), "EQ");
  };
  auto unit = [&](const Value& v) {  // +-1 for an infinity, +-0 otherwise
    return copysign(b, select(b, inf(v), full_like(b, v, 1), full_like(b, v, 0)), v);
  };
  auto nan_to_zero = [&](const Value& v) {
    return select(b, is_nan(b, v), copysign(b, full_like(b, v, 0), v), v);
  };
  Value ac = mul(a, c), bd = mul(bb, d), ad = mul(a, d), bc = mul(bb, c);
  Value re = binary(b, "stablehlo.subtract", ac, bd), im = binary(b, "stablehlo.add", ad, bc);
  Value z_inf = b_or(b, inf(a), inf(bb)), w_inf = b_or(b, inf(c), inf(d));
  Value overflowed = b_or(b, b_or(b, inf(ac), inf(bd)), b_or(b, inf(ad), inf(bc)));
  // The factors as recovery takes them.
  Value ra = select(b, z_inf, unit(a), select(b, w_inf, nan_to_zero(a), a));
  Value rb = select(b, z_inf, unit(bb), select(b, w_inf, nan_to_zero(bb), bb));
  Value rc = select(b, w_inf, unit(c), select(b, z_inf, nan_to_zero(c), c));
  Value rd = select(b, w_inf, unit(d), select(b, z_inf, nan_to_zero(d), d));
  Value only_overflow = b_and(b, overflowed, unary(b, "stablehlo.not", b_or(b, z_inf, w_inf)));
  ra = select(b, only_overflow, nan_to_zero(a), ra);
  rb = select(b, only_overflow, nan_to_zero(bb), rb);
  rc = select(b, only_overflow, nan_to_zero(c), rc);
  rd = select(b, only_overflow, nan_to_zero(d), rd);
  Value big = full_like(b, a, kInfinity);
  Value re2 = mul(big, binary(b, "stablehlo.subtract", mul(ra, rc), mul(rb, rd)));
  Value im2 = mul(big, binary(b, "stablehlo.add", mul(ra, rd), mul(rb, rc)));
  Value recover = b_and(b, b_and(b, is_nan(b, re), is_nan(b, im)),
                        b_or(b, b_or(b, z_inf, w_inf), overflowed));
  return make_complex(b, select(b, recover, re2, re), select(b, recover, im2, im), z.shape.type);
}

// x ** y; of complex values exp(y log x), as the CPU's cpow computes it (with C99's product:
// 0 ** (1 + i) is 0, 0 ** 0 NaN, as there; XLA's gave NaN and 1).
Value power(FunctionBuilder& b, const Value& x, const Value& y) {
  if (!hlo::is_complex(x.shape.type)) return binary(b, "stablehlo.power", x, y);
  return complex_aware(b, "exp", "stablehlo.exponential",
                       c99_multiply(b, y, complex_aware(b, "log", "stablehlo.log", x)));
}

// x ** y for a Scalar y (pow.Tensor_Scalar). A complex x to a real power of 0, 1, 2, 3, 1/2,
// -1/2, -1 or -2 is, as on the CPU, 1, itself, a product, sqrt, rsqrt or reciprocal, not
// exp(y log x): (NaN i) ** 2 was 0, (1 + 2i) ** 2 inexact.
Value power_of_scalar(FunctionBuilder& b, const Value& x, const Value& y) {
  Value r = power(b, x, y);
  if (!hlo::is_complex(x.shape.type)) return r;
  auto [y_re, y_im] = real_and_imag(b, y);
  Value real_exponent = compare(b, y_im, full_like(b, y_im, 0), "EQ");
  Value square = binary(b, "stablehlo.multiply", x, x);
  const std::pair<double, Value> cases[] = {
      {0, full_like(b, x, 1)},
      {1, x},
      {2, square},
      {3, binary(b, "stablehlo.multiply", square, x)},
      {0.5, complex_aware(b, "sqrt", "stablehlo.sqrt", x)},
      {-0.5, complex_aware(b, "rsqrt", "stablehlo.rsqrt", x)},
      {-1, reciprocal(b, x)},
      {-2, reciprocal(b, square)},
  };
  for (const auto& [exponent, value] : cases) {
    Value here = b_and(b, real_exponent, compare(b, y_re, full_like(b, y_re, exponent), "EQ"));
    r = select(b, here, value, r);
  }
  return r;
}

// gcd(x, y) of integers, by Euclid's algorithm on every element at once until all remainders
// are 0; the result is non-negative, and gcd(0, 0) = 0.
Value gcd(FunctionBuilder& b, const Value& x, const Value& y) {
  std::vector<Value> state = {unary(b, "stablehlo.abs", x), unary(b, "stablehlo.abs", y)};
  auto nonzero = [](FunctionBuilder& r, const Value& v) {
    return compare(r, v, full_like(r, v, 0), "NE");
  };
  std::vector<Value> out = while_loop(
      b, state,
      [nonzero](FunctionBuilder& r, const std::vector<Value>& s) {
        Dims all(s[1].shape.dims.size());
        for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
        Value any = reduce(r, nonzero(r, s[1]), all, constant(r, ElementType::kPred, 0),
                           "stablehlo.or");
        return std::vector<Value>{any};
      },
      [nonzero](FunctionBuilder& r, const std::vector<Value>& s) {
        Value go = nonzero(r, s[1]);
        Value divisor = select(r, go, s[1], full_like(r, s[1], 1));
        Value rest = binary(r, "stablehlo.remainder", s[0], divisor);
        return std::vector<Value>{select(r, go, s[1], s[0]), select(r, go, rest, s[1])};
      });
  return out[0];
}

// lcm(x, y) = |x / gcd(x, y) * y|, and 0 where gcd is 0 (both are 0).
Value lcm(FunctionBuilder& b, const Value& x, const Value& y) {
  Value g = gcd(b, x, y);
  Value zero = compare(b, g, full_like(b, g, 0), "EQ");
  Value q = binary(b, "stablehlo.divide", x, select(b, zero, full_like(b, g, 1), g));
  Value l = unary(b, "stablehlo.abs", binary(b, "stablehlo.multiply", q, y));
  return select(b, zero, full_like(b, g, 0), l);
}

// heaviside(x, values): values where x == 0, else x > 0 (so 0 for NaN).
Value heaviside(FunctionBuilder& b, const Value& x, const Value& values) {
  Value step = convert(b, compare(b, x, full_like(b, x, 0), "GT"), x.shape.type);
  return select(b, compare(b, x, full_like(b, x, 0), "EQ"), values, step);
}

// hypot: max * sqrt(1 + (min/max)^2), so x^2 + y^2 never overflows; an infinity wins over NaN.
Value hypot(FunctionBuilder& b, const Value& x, const Value& y) {
  Value ax = unary(b, "stablehlo.abs", x), ay = unary(b, "stablehlo.abs", y);
  Value hi = maximum(b, ax, ay), lo = minimum(b, ax, ay);
  Value ratio = binary(b, "stablehlo.divide", lo, hi);
  Value root = unary(b, "stablehlo.sqrt", binary(b, "stablehlo.add", full_like(b, x, 1),
                                                binary(b, "stablehlo.multiply", ratio, ratio)));
  Value h = select(b, compare(b, hi, full_like(b, x, 0), "EQ"), hi,
                   binary(b, "stablehlo.multiply", hi, root));
  Value inf = full_like(b, x, INFINITY);
  Value any_inf = b_or(b, compare(b, ax, inf, "EQ"), compare(b, ay, inf, "EQ"));
  return select(b, any_inf, inf, h);
}

// logaddexp(2): max + log(1 + base^-|x - y|); equal infinities give themselves.
Value logaddexp(FunctionBuilder& b, const Value& x, const Value& y, bool base2) {
  Value hi = maximum(b, x, y);
  Value d = unary(b, "stablehlo.negate",
                  unary(b, "stablehlo.abs", binary(b, "stablehlo.subtract", x, y)));
  Value sum;
  if (base2) {
    Value e = binary(b, "stablehlo.power", full_like(b, x, 2), d);
    sum = binary(b, "stablehlo.divide", unary(b, "stablehlo.log_plus_one", e),
                 full_like(b, x, M_LN2));
  } else {
    sum = unary(b, "stablehlo.log_plus_one", unary(b, "stablehlo.exponential", d));
  }
  Value same_inf = b_and(b, compare(b, x, y, "EQ"),
                         compare(b, unary(b, "stablehlo.abs", x), full_like(b, x, INFINITY), "EQ"));
  return select(b, same_inf, x, binary(b, "stablehlo.add", hi, sum));
}

// xlogy / xlog1py: 0 where x == 0 unless y is NaN, else x * log(y) (log1p(y)).
LoweringRule x_log(const std::string& log_op) {
  return float_binary_fn([log_op](FunctionBuilder& b, const Value& x, const Value& y) {
    Value product = binary(b, "stablehlo.multiply", x, unary(b, log_op, y));
    Value zero = full_like(b, x, 0);
    Value x_zero = b_and(b, compare(b, x, zero, "EQ"), unary(b, "stablehlo.not", is_nan(b, y)));
    return select(b, x_zero, zero, product);
  });
}

// angle: atan2(imag, real) of a complex; of a real, pi below 0, NaN for NaN, else 0.
Values angle(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  if (hlo::is_complex(v[0].shape.type)) {
    auto [re, im] = real_and_imag(b, v[0]);
    return {convert(b, binary(b, "stablehlo.atan2", im, re), t)};
  }
  Value x = arg(b, v, 0, opmath(t), a);
  Value zero = full_like(b, x, 0);
  Value r = select(b, compare(b, x, zero, "LT"), full_like(b, x, M_PI), zero);
  return {convert(b, select(b, is_nan(b, x), x, r), t)};
}

// complex(real, imag) and polar(abs, angle).
LoweringRule complex_from(bool polar) {
  return [polar](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), part = real_part(t);
    Value x = arg(b, v, 0, part, a), y = arg(b, v, 1, part, a);
    if (polar) {
      Value re = binary(b, "stablehlo.multiply", x, unary(b, "stablehlo.cosine", y));
      y = binary(b, "stablehlo.multiply", x, unary(b, "stablehlo.sine", y));
      x = re;
    }
    return Values{make_complex(b, x, y, t)};
  };
}

// sgn: x / |x| for a complex (0 at 0), sign for a real.
Values sgn(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  if (!hlo::is_complex(t)) return {convert(b, sign(b, arg(b, v, 0, opmath(t), a)), t)};
  Value x = arg(b, v, 0, t, a);
  Value m = modulus(b, x);
  Value zero = full_like(b, m, 0);
  auto [re, im] = real_and_imag(b, x);  // each part divided, as the CPU (sgn(1 + inf i) = NaN i)
  Value unit = make_complex(b, binary(b, "stablehlo.divide", re, m),
                            binary(b, "stablehlo.divide", im, m), t);
  return {select(b, compare(b, m, zero, "EQ"), full_like(b, x, 0), unit)};
}

// round(x, decimals) as PyTorch's CPU: scale by 10^|decimals|, round half to even, scale back.
Values round_decimals(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Value x = arg(b, v, 0, opmath(t), a);
  int64_t decimals = a.has("decimals") ? a.i("decimals") : 0;
  if (integral(t)) return {x};
  if (decimals == 0) return {convert(b, unary(b, "stablehlo.round_nearest_even", x), t)};
  // Each step rounded to x's type from float64: XLA turns a division by a constant into a
  // multiplication by its reciprocal, one ulp off the CPU's division in x's own type.
  ElementType c = x.shape.type, w = wide(c);
  Value scale = full(b, w, x.shape.dims, std::pow(10.0, static_cast<double>(std::abs(decimals))));
  auto step = [&](const char* op, const Value& v) {
    return convert(b, binary(b, op, convert(b, v, w), scale), c);
  };
  const char* in = decimals > 0 ? "stablehlo.multiply" : "stablehlo.divide";
  const char* back = decimals > 0 ? "stablehlo.divide" : "stablehlo.multiply";
  Value rounded = unary(b, "stablehlo.round_nearest_even", step(in, x));
  return {convert(b, step(back, rounded), t)};
}

// sinc: sin(pi x) / (pi x), 1 at 0. The product is rounded in x's type as on the CPU; the
// quotient is taken in float64 for float32, where XLA's sine is a few ulp from the CPU's.
Value sinc(FunctionBuilder& b, const Value& x) {
  Value product = binary(b, "stablehlo.multiply", x, full_like(b, x, M_PI));
  Value p = convert(b, product, wide(x.shape.type));
  Value q = convert(b, binary(b, "stablehlo.divide", unary(b, "stablehlo.sine", p), p),
                    x.shape.type);
  return select(b, compare(b, x, full_like(b, x, 0), "EQ"), full_like(b, x, 1), q);
}

// frexp: mantissa in [0.5, 1) with x's sign, and exponent, read from the bits (subnormals
// normalized with a leading-zero count); 0, inf and NaN give (x, 0).
Values frexp(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  ElementType c = t == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
  Value x = convert(b, v[0], c);
  bool f64 = c == ElementType::kF64;
  ElementType it = f64 ? ElementType::kS64 : ElementType::kS32;
  const Dims& d = x.shape.dims;
  int64_t width = f64 ? 64 : 32, mant = f64 ? 52 : 23, bias = f64 ? 1022 : 126;
  int64_t exp_mask = f64 ? 0x7ff : 0xff, frac_mask = (int64_t{1} << mant) - 1;
  auto k = [&](int64_t value) { return int_full(b, it, d, value); };
  auto op = [&](const char* name, const Value& p, const Value& q) { return binary(b, name, p, q); };
  Value bits = bitcast(b, x, it);
  Value e_raw = op("stablehlo.and", op("stablehlo.shift_right_logical", bits, k(mant)),
                   k(exp_mask));
  Value frac = op("stablehlo.and", bits, k(frac_mask));
  Value sign = op("stablehlo.and", bits, k(std::numeric_limits<int64_t>::min() >> (64 - width)));
  Value subnormal = compare(b, e_raw, k(0), "EQ");
  // A subnormal's leading bit p: value = 1.f * 2^(p - bias - mant - 1).
  Value p = op("stablehlo.subtract", k(width - 1), unary(b, "stablehlo.count_leading_zeros", frac));
  Value shifted = op("stablehlo.and",
                     op("stablehlo.shift_left", frac, op("stablehlo.subtract", k(mant), p)),
                     k(frac_mask));
  Value e = select(b, subnormal, op("stablehlo.subtract", p, k(bias + mant - 1)),
                   op("stablehlo.subtract", e_raw, k(bias)));
  Value m_bits = op("stablehlo.or", op("stablehlo.or", sign, k(bias << mant)),
                    select(b, subnormal, shifted, frac));
  Value m = bitcast(b, m_bits, c);
  // Zero from the bits too: XLA's CPU compares treat subnormals as zero.
  Value zero = compare(b, op("stablehlo.or", e_raw, frac), k(0), "EQ");
  Value special = b_or(b, zero, compare(b, e_raw, k(exp_mask), "EQ"));
  return {convert(b, select(b, special, x, m), t),
          convert(b, select(b, special, k(0), e), out_type(a, 1))};
}

// A bitwise op (and, or, xor, not) of integers and bools only, refused for floating and complex
// operands with the CPU's message (StableHLO's ops would fail to compile).
LoweringRule bitwise(const std::string& name, LoweringRule rule) {
  return [name, rule](FunctionBuilder& b, const Values& v, const Attrs& a) {
    static const std::pair<ElementType, const char*> kFloating[] = {
        {ElementType::kF16, "Half"},          {ElementType::kBF16, "BFloat16"},
        {ElementType::kF32, "Float"},         {ElementType::kF64, "Double"},
        {ElementType::kC64, "ComplexFloat"}, {ElementType::kC128, "ComplexDouble"}};
    for (const auto& [type, torch_name] : kFloating) {
      if (compute_type(a) == type) {
        throw Refused("\"" + name + "_tpu\" not implemented for '" + torch_name + "'");
      }
    }
    return rule(b, v, a);
  };
}

}  // namespace

Value tensor_power(FunctionBuilder& b, const Value& x, const Value& y) { return power(b, x, y); }

Value complex_log_add_exp(FunctionBuilder& b, const Value& x, const Value& y) {
  auto has_nan = [&](const Value& z) {
    auto [re, im] = real_and_imag(b, z);
    return b_or(b, is_nan(b, re), is_nan(b, im));
  };
  auto real = [&](const Value& z) { return real_and_imag(b, z).first; };
  auto exp = [&](const Value& z) { return complex_aware(b, "exp", "stablehlo.exponential", z); };
  Value x_lower = compare(b, real(x), real(y), "LT");
  Value lo = select(b, x_lower, x, y), hi = select(b, x_lower, y, x);
  Value general = binary(b, "stablehlo.add",
                         complex_aware(b, "log1p", "stablehlo.log_plus_one",
                                       exp(binary(b, "stablehlo.subtract", lo, hi))),
                         hi);
  Value lo_re = real(lo);
  Value same_infinity = b_and(b, compare(b, lo_re, real(hi), "EQ"),
                              compare(b, unary(b, "stablehlo.abs", lo_re),
                                      full_like(b, lo_re, kInfinity), "EQ"));
  Value both_plus = complex_aware(b, "log", "stablehlo.log",
                                  binary(b, "stablehlo.add", exp(lo), exp(hi)));
  Value infinite = select(b, compare(b, lo_re, full_like(b, lo_re, 0), "LT"), lo, both_plus);
  Value nan = full_like(b, lo_re, kNan);
  return select(b, b_or(b, has_nan(x), has_nan(y)), make_complex(b, nan, nan, x.shape.type),
                select(b, same_infinity, infinite, general));
}

void register_math_rules(Registry& r) {
  const std::pair<const char*, const char*> functions[] = {
      {"exp", "stablehlo.exponential"}, {"expm1", "stablehlo.exponential_minus_one"},
      {"log", "stablehlo.log"},         {"log1p", "stablehlo.log_plus_one"},
      {"sqrt", "stablehlo.sqrt"},       {"rsqrt", "stablehlo.rsqrt"},
      {"tanh", "stablehlo.tanh"},       {"sigmoid", "stablehlo.logistic"},
      {"sin", "stablehlo.sine"},        {"cos", "stablehlo.cosine"},
      {"tan", "stablehlo.tan"},         {"atan", "chlo.atan"},
      {"asin", "chlo.asin"},            {"acos", "chlo.acos"},
      {"sinh", "chlo.sinh"},            {"cosh", "chlo.cosh"},
      {"asinh", "chlo.asinh"},          {"acosh", "chlo.acosh"},
      {"atanh", "chlo.atanh"},          {"erfinv", "chlo.erf_inv"},
      {"lgamma", "chlo.lgamma"},
      {"neg", "stablehlo.negate"},
  };
  for (const auto& [name, op] : functions) {
    std::string fn = name, hlo_op = op;
    r.add(name, unary_fn([fn, hlo_op](FunctionBuilder& b, const Value& x) {
            return complex_aware(b, fn, hlo_op, x);
          }), all(name));
  }
  r.add("bitwise_not", bitwise("bitwise_not", unary_op("stablehlo.not")), all("bitwise_not"));
  // abs of a complex number is its modulus, a real: computed on the complex value itself.
  const LoweringRule real_abs = unary_op("stablehlo.abs");
  r.add("abs",
        [real_abs](FunctionBuilder& b, const Values& v, const Attrs& a) {
          if (!hlo::is_complex(v.at(0).shape.type)) return real_abs(b, v, a);
          return Values{convert(b, modulus(b, v[0]), out_type(a))};
        },
        all("abs"));
  r.add("sign", unary_fn(sign), all("sign"));
  r.add("floor", rounding("stablehlo.floor"), all("floor"));
  r.add("ceil", rounding("stablehlo.ceil"), all("ceil"));
  r.add("round", round_decimals,
        {"round", "round_", "round.out", "round.decimals", "round_.decimals",
         "round.decimals_out"});
  r.add("trunc", unary_fn(trunc), all("trunc"));
  r.add("reciprocal", unary_fn(reciprocal), all("reciprocal"));
  r.add("relu", unary_fn(relu), all("relu"));
  r.add("silu", unary_fn(silu), all("silu"));
  r.add("log2", unary_fn([](FunctionBuilder& b, const Value& x) { return log_base(b, x, 2); }),
        all("log2"));
  r.add("log10", unary_fn([](FunctionBuilder& b, const Value& x) { return log_base(b, x, 10); }),
        all("log10"));
  r.add("erf", unary_fn(erf), all("erf"));
  r.add("erfc", unary_op("chlo.erfc"), all("erfc"));  // not 1 - erf(x): erfc(10) is 2.1e-45
  r.add("gelu", gelu_rule, all("gelu"));
  r.add("gelu_backward", gelu_backward, all("gelu_backward"));
  r.add("silu_backward", silu_backward, all("silu_backward"));
  r.add("sigmoid_backward", sigmoid_backward, all("sigmoid_backward"));
  r.add("tanh_backward", tanh_backward, all("tanh_backward"));
  r.add("threshold_backward", threshold_backward, all("threshold_backward"));
  r.add("leaky_relu", leaky_relu, all("leaky_relu"));
  r.add("leaky_relu_backward", leaky_relu_backward, all("leaky_relu_backward"));

  r.add("isnan", predicate([](FunctionBuilder& b, const Value& x) {
          return compare(b, x, x, "NE");
        }, false), {"isnan", "isnan.out"});
  r.add("isinf", predicate([](FunctionBuilder& b, const Value& x) {
          auto infinite = [&b](const Value& y) {
            return compare(b, unary(b, "stablehlo.abs", y), extreme_like(b, y, true), "EQ");
          };
          if (!hlo::is_complex(x.shape.type)) return infinite(x);
          auto [re, im] = real_and_imag(b, x);  // either part infinite, as PyTorch
          return b_or(b, infinite(re), infinite(im));
        }, false), {"isinf", "isinf.out"});
  r.add("isposinf", predicate([](FunctionBuilder& b, const Value& x) {
          return compare(b, x, extreme_like(b, x, true), "EQ");
        }, false), all("isposinf"));
  r.add("isneginf", predicate([](FunctionBuilder& b, const Value& x) {
          return compare(b, x, extreme_like(b, x, false), "EQ");
        }, false), all("isneginf"));
  r.add("isfinite", predicate([](FunctionBuilder& b, const Value& x) {
          return b.op("stablehlo.is_finite", {x}, Shape{ElementType::kPred, x.shape.dims});
        }, true), {"isfinite"});
  r.add("logical_not", [](FunctionBuilder& b, const Values& v, const Attrs& a) {
          Value x = convert(b, v[0], ElementType::kPred);
          return Values{convert(b, unary(b, "stablehlo.not", x), out_type(a))};
        }, all("logical_not"));

  const std::pair<const char*, const char*> comparisons[] = {
      {"eq", "EQ"}, {"ne", "NE"}, {"lt", "LT"}, {"le", "LE"}, {"gt", "GT"}, {"ge", "GE"}};
  for (const auto& [name, direction] : comparisons) {
    r.predicate(name, comparison(direction),
                  {std::string(name) + ".Tensor", std::string(name) + ".Scalar",
                   std::string(name) + ".Tensor_out", std::string(name) + ".Scalar_out",
                   std::string(name) + "_.Tensor", std::string(name) + "_.Scalar"});
  }
  r.predicate("logical_and", logical("stablehlo.and"), all("logical_and"));
  r.predicate("logical_or", logical("stablehlo.or"), all("logical_or"));
  r.predicate("logical_xor", logical("stablehlo.xor"), all("logical_xor"));
  for (const char* name : {"bitwise_and", "bitwise_or", "bitwise_xor"}) {
    std::string op = std::string("stablehlo.") + (name + 8);  // and, or, xor
    r.elementwise(name, bitwise(name, binary_op(op)), all(name));
  }
  r.elementwise("maximum", binary_fn(maximum), all("maximum"));
  r.elementwise("shift_left", shift(true), {"__lshift__.Scalar", "__lshift__.Tensor",
                                            "__ilshift__.Scalar", "__ilshift__.Tensor",
                                            "bitwise_left_shift.*"});
  r.elementwise("shift_right", shift(false), {"__rshift__.Scalar", "__rshift__.Tensor",
                                              "__irshift__.Scalar", "__irshift__.Tensor",
                                              "bitwise_right_shift.*"});
  r.elementwise("minimum", binary_fn(minimum), all("minimum"));
  r.elementwise("max_other", binary_fn(maximum), {"max.other"});
  r.elementwise("min_other", binary_fn(minimum), {"min.other"});
  r.elementwise("pow", binary_fn(power),
                {"pow.Tensor_Tensor", "pow.Scalar", "pow.Tensor_Tensor_out", "pow.Scalar_out",
                 "pow_.Tensor"});
  r.elementwise("pow_of_scalar", binary_fn(power_of_scalar),
                {"pow.Tensor_Scalar", "pow.Tensor_Scalar_out", "pow_.Scalar"});
  r.elementwise("atan2", float_binary_fn([](FunctionBuilder& b, const Value& y, const Value& x) {
                  return binary(b, "stablehlo.atan2", y, x);
                }),
                all("atan2"));
  // digamma(+-0) is -+inf, as the CPU has it (XLA's gives NaN there).
  r.add("digamma", unary_fn([](FunctionBuilder& b, const Value& x) {
          Value inf = copysign(b, full_like(b, x, INFINITY), unary(b, "stablehlo.negate", x));
          return select(b, compare(b, x, full_like(b, x, 0), "EQ"), inf,
                        unary(b, "chlo.digamma", x));
        }),
        all("digamma"));
  r.elementwise("fmod", binary_op("stablehlo.remainder"), all("fmod"));
  r.elementwise("remainder", binary_fn(python_remainder), all("remainder"));
  r.elementwise("where", where, {"where.self", "where.self_out", "where.ScalarOther",
                                 "where.ScalarSelf", "where.Scalar"});
  // Not TensorIterator's overlap rule: the CPU reads a 0-d value before it writes.
  r.add("masked_fill", masked_fill, all("masked_fill"));
  r.elementwise("clamp", clamp, all("clamp"));
  r.elementwise("clamp_min", binary_fn(maximum), all("clamp_min"));
  r.elementwise("clamp_max", binary_fn(minimum), all("clamp_max"));
  r.elementwise("addcmul", addc("stablehlo.multiply"), all("addcmul"));
  r.elementwise("addcdiv", addc("stablehlo.divide"), all("addcdiv"));
  r.elementwise("lerp", lerp, all("lerp"));

  r.add("angle", angle, {"angle", "angle.out"});
  r.elementwise("complex", complex_from(false), {"complex", "complex.out"});
  r.elementwise("polar", complex_from(true), {"polar", "polar.out"});
  r.add("sgn", sgn, all("sgn"));
  r.add("signbit", [](FunctionBuilder& b, const Values& v, const Attrs& a) {
          return Values{convert(b, sign_bit(b, v[0]), out_type(a))};
        }, {"signbit", "signbit.out"});
  r.add("frexp", frexp, {"frexp.Tensor", "frexp.Tensor_out"});
  // exp2 of a complex z is exp(z log 2), each part of z scaled, as the CPU.
  r.add("exp2", unary_fn([](FunctionBuilder& b, const Value& x) {
          if (!hlo::is_complex(x.shape.type)) {
            return binary(b, "stablehlo.power", full_like(b, x, 2), x);
          }
          auto [re, im] = real_and_imag(b, x);
          Value ln2 = full_like(b, re, M_LN2);
          Value scaled = make_complex(b, binary(b, "stablehlo.multiply", re, ln2),
                                      binary(b, "stablehlo.multiply", im, ln2), x.shape.type);
          return complex_aware(b, "exp", "stablehlo.exponential", scaled);
        }), all("exp2"));
  r.add("frac", unary_fn([](FunctionBuilder& b, const Value& x) {
          return binary(b, "stablehlo.subtract", x, trunc(b, x));
        }), all("frac"));
  r.add("sinc", unary_fn(sinc), all("sinc"));
  r.elementwise("copysign", float_binary_fn(copysign), all("copysign"));
  r.elementwise("fmax", binary_fn([](FunctionBuilder& b, const Value& x, const Value& y) {
                  return ignoring_nan(b, x, y, maximum(b, x, y));
                }), all("fmax"));
  r.elementwise("fmin", binary_fn([](FunctionBuilder& b, const Value& x, const Value& y) {
                  return ignoring_nan(b, x, y, minimum(b, x, y));
                }), all("fmin"));
  r.elementwise("heaviside", binary_fn(heaviside), all("heaviside"));
  r.elementwise("hypot", float_binary_fn(hypot), all("hypot"));
  r.elementwise("gcd", binary_fn(gcd), all("gcd"));
  r.elementwise("lcm", binary_fn(lcm), all("lcm"));
  r.elementwise("logaddexp", float_binary_fn([](FunctionBuilder& b, const Value& x,
                                                const Value& y) {
                  if (hlo::is_complex(x.shape.type)) return complex_log_add_exp(b, x, y);
                  return logaddexp(b, x, y, false);
                }), {"logaddexp", "logaddexp.out"});
  r.elementwise("logaddexp2", float_binary_fn([](FunctionBuilder& b, const Value& x,
                                                 const Value& y) {
                  return logaddexp(b, x, y, true);
                }), {"logaddexp2", "logaddexp2.out"});
  r.elementwise("nextafter", binary_op("chlo.next_after"), all("nextafter"));
  r.elementwise("xlogy", x_log("stablehlo.log"), all("xlogy"));
  r.elementwise("xlog1py", x_log("stablehlo.log_plus_one"), all("special_xlog1py"));
}

}  // namespace torchtpu::lowering
