// Elementwise math beyond arithmetic: unary functions, comparisons, logic, selection, activations
// and their gradients. Operands arrive in their own dtypes; outputs are in PyTorch's (attrs).
#include <cmath>

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

Value erf(FunctionBuilder& b, const Value& x) { return unary(b, "chlo.erf", x); }

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
  ElementType c = opmath(out_type(a));
  Value x = arg(b, v, 0, c, a), y = arg(b, v, 1, c, a), w = arg(b, v, 2, c, a);
  Value diff = binary(b, "stablehlo.subtract", y, x);
  Value low = binary(b, "stablehlo.add", x, binary(b, "stablehlo.multiply", w, diff));
  Value high = binary(b, "stablehlo.subtract", y,
                      binary(b, "stablehlo.multiply", diff,
                             binary(b, "stablehlo.subtract", full_like(b, w, 1), w)));
  Value small = compare(b, unary(b, "stablehlo.abs", w), full_like(b, w, 0.5), "LT");
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

Value reciprocal(FunctionBuilder& b, const Value& x) {
  return binary(b, "stablehlo.divide", full_like(b, x, 1), x);
}

Value log_base(FunctionBuilder& b, const Value& x, double base) {
  return binary(b, "stablehlo.divide", unary(b, "stablehlo.log", x),
                full_like(b, x, std::log(base)));
}

// PyTorch's sign of a float is (0 < x) - (x < 0): 0 for NaN, and +0 for -0.
Value sign(FunctionBuilder& b, const Value& x) {
  if (x.shape.type == ElementType::kPred) return x;
  if (!hlo::is_floating(x.shape.type)) return unary(b, "stablehlo.sign", x);
  Value zero = full_like(b, x, 0);
  return binary(b, "stablehlo.subtract", convert(b, compare(b, x, zero, "GT"), x.shape.type),
                convert(b, compare(b, x, zero, "LT"), x.shape.type));
}

std::vector<std::string> all(const std::string& name) { return {name + ".*"}; }

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

}  // namespace

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
      {"atanh", "chlo.atanh"},          {"erf", "chlo.erf"},
      {"erfinv", "chlo.erf_inv"},       {"lgamma", "chlo.lgamma"},
      {"digamma", "chlo.digamma"},      {"neg", "stablehlo.negate"},
      {"bitwise_not", "stablehlo.not"},
  };
  for (const auto& [name, op] : functions) r.add(name, unary_op(op), all(name));
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
  r.add("round", rounding("stablehlo.round_nearest_even"), {"round", "round_", "round.out"});
  r.add("trunc", unary_fn([](FunctionBuilder& b, const Value& x) {
          if (integral(x.shape.type)) return x;
          Value negative = compare(b, x, full_like(b, x, 0), "LT");
          return select(b, negative, unary(b, "stablehlo.ceil", x),
                        unary(b, "stablehlo.floor", x));
        }),
        all("trunc"));
  r.add("reciprocal", unary_fn(reciprocal), all("reciprocal"));
  r.add("relu", unary_fn(relu), all("relu"));
  r.add("silu", unary_fn(silu), all("silu"));
  r.add("log2", unary_fn([](FunctionBuilder& b, const Value& x) { return log_base(b, x, 2); }),
        all("log2"));
  r.add("log10", unary_fn([](FunctionBuilder& b, const Value& x) { return log_base(b, x, 10); }),
        all("log10"));
  r.add("erfc", unary_fn([](FunctionBuilder& b, const Value& x) {
          return binary(b, "stablehlo.subtract", full_like(b, x, 1), erf(b, x));
        }),
        all("erfc"));
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
          return compare(b, unary(b, "stablehlo.abs", x), extreme_like(b, x, true), "EQ");
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
  r.elementwise("bitwise_and", binary_op("stablehlo.and"), all("bitwise_and"));
  r.elementwise("bitwise_or", binary_op("stablehlo.or"), all("bitwise_or"));
  r.elementwise("bitwise_xor", binary_op("stablehlo.xor"), all("bitwise_xor"));
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
  r.elementwise("pow", binary_op("stablehlo.power"),
                {"pow.Tensor_Tensor", "pow.Tensor_Scalar", "pow.Scalar", "pow.Tensor_Tensor_out",
                 "pow.Tensor_Scalar_out", "pow.Scalar_out", "pow_.Scalar", "pow_.Tensor"});
  r.elementwise("atan2", binary_op("stablehlo.atan2"), all("atan2"));
  r.elementwise("fmod", binary_op("stablehlo.remainder"), all("fmod"));
  r.elementwise("remainder", binary_fn(python_remainder), all("remainder"));
  r.elementwise("where", where, {"where.self", "where.self_out", "where.ScalarOther",
                                 "where.ScalarSelf", "where.Scalar"});
  r.elementwise("masked_fill", masked_fill, all("masked_fill"));
  r.elementwise("clamp", clamp, all("clamp"));
  r.elementwise("clamp_min", binary_fn(maximum), all("clamp_min"));
  r.elementwise("clamp_max", binary_fn(minimum), all("clamp_max"));
  r.elementwise("addcmul", addc("stablehlo.multiply"), all("addcmul"));
  r.elementwise("addcdiv", addc("stablehlo.divide"), all("addcdiv"));
  r.elementwise("lerp", lerp, all("lerp"));
}

}  // namespace torchtpu::lowering
