// Activation functions and their gradients (hardtanh, elu, softplus, glu, prelu, ...). Every
// operand, tensors and Scalar arguments alike, is converted to opmath(output type) and broadcast
// to the output shape. At a NaN input the CPU's gradients depend on whether its vectorized or
// its scalar loop ran (hardtanh_backward gives 0 in one, the gradient in the other): the rules
// follow the vectorized loop, which large tensors take (0 where it masks, NaN where it computes).
#include "lowering/arith.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

using Fn = std::function<Value(FunctionBuilder&, const Values&)>;

LoweringRule pointwise(Fn f) {
  return [f](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    Values x;
    for (const Value& o : v) x.push_back(promote(b, o, c, out_shape(a)));
    return Values{convert(b, f(b, x), t)};
  };
}

Value lt(FunctionBuilder& b, const Value& x, const Value& y) { return compare(b, x, y, "LT"); }
Value gt(FunctionBuilder& b, const Value& x, const Value& y) { return compare(b, x, y, "GT"); }
Value le(FunctionBuilder& b, const Value& x, const Value& y) { return compare(b, x, y, "LE"); }
Value ge(FunctionBuilder& b, const Value& x, const Value& y) { return compare(b, x, y, "GE"); }
Value neg(FunctionBuilder& b, const Value& x) { return unary(b, "stablehlo.negate", x); }
Value exp(FunctionBuilder& b, const Value& x) { return unary(b, "stablehlo.exponential", x); }

// min(max(x + 3, 0), 6) / 6
Value hardsigmoid(FunctionBuilder& b, const Value& x) {
  Value r = minimum(b, maximum(b, add(b, x, like(b, x, 3)), like(b, x, 0)), like(b, x, 6));
  return divide(b, r, like(b, x, 6));
}

// The gradient `g` where lo < x < hi (exclusive), else 0: hardtanh's and hardsigmoid's.
Value inside(FunctionBuilder& b, const Value& g, const Value& x, const Value& lo,
             const Value& hi) {
  return select(b, b_and(b, gt(b, x, lo), lt(b, x, hi)), g, like(b, g, 0));
}

// x with |x| <= lambd: the shrink functions' dead zone.
Value dead_zone(FunctionBuilder& b, const Value& x, const Value& lambd) {
  return b_and(b, ge(b, x, neg(b, lambd)), le(b, x, lambd));
}

// The shrinks' gradient: `g` outside [-lambd, lambd], else 0 (so 0 for NaN).
Value shrink_backward(FunctionBuilder& b, const Values& v) {
  const Value &g = v[0], &x = v[1], &l = v[2];
  return select(b, b_or(b, lt(b, x, neg(b, l)), gt(b, x, l)), g, like(b, g, 0));
}

Value softplus(FunctionBuilder& b, const Value& x, const Value& beta, const Value& threshold) {
  Value xb = mul(b, x, beta);
  Value soft = divide(b, unary(b, "stablehlo.log_plus_one", exp(b, xb)), beta);
  return select(b, gt(b, xb, threshold), x, soft);
}

// logit's eps clamp [eps, 1 - eps], which a negative eps turns off.
Value logit_clamp(FunctionBuilder& b, const Value& x, const Value& eps) {
  Value hi = sub(b, like(b, x, 1), eps);
  Value clamped = select(b, lt(b, x, eps), eps, select(b, gt(b, x, hi), hi, x));
  return select(b, lt(b, eps, like(b, eps, 0)), x, clamped);
}

// logit_backward(grad_output, self, eps?)
Value logit_backward(FunctionBuilder& b, const Values& v) {
  const Value &g = v[0], &x = v[1];
  Value plain = divide(b, g, mul(b, x, sub(b, like(b, x, 1), x)));
  if (v.size() < 3) return plain;
  const Value& eps = v[2];
  Value in_range = b_and(b, ge(b, x, eps), le(b, x, sub(b, like(b, x, 1), eps)));
  Value off = lt(b, eps, like(b, eps, 0));
  return select(b, b_or(b, off, in_range), plain, like(b, g, 0));
}

// log_sigmoid_forward(self) -> (output, buffer): buffer = exp(-|x|) where PyTorch's meta function
// gives it a shape (the CPU's), empty otherwise.
Values log_sigmoid(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  Value z = exp(b, neg(b, unary(b, "stablehlo.abs", x)));
  Value y = sub(b, minimum(b, x, like(b, x, 0)), unary(b, "stablehlo.log_plus_one", z));
  Dims buffer = out_shape(a, 1);
  Value buf = buffer == x.shape.dims ? z : full(b, c, buffer, 0);
  return {convert(b, y, t), convert(b, buf, out_type(a, 1))};
}

// log_sigmoid_backward(grad_output, self, buffer): the buffer is recomputed from self (CUDA's
// is empty).
Value log_sigmoid_backward(FunctionBuilder& b, const Values& v) {
  const Value &g = v[0], &x = v[1];
  Value z = exp(b, neg(b, unary(b, "stablehlo.abs", x)));
  Value negative = lt(b, x, like(b, x, 0));
  Value ratio = divide(b, z, add(b, like(b, z, 1), z));
  Value d = select(b, negative, sub(b, like(b, x, 1), ratio), ratio);
  return mul(b, g, d);
}

// elu(self, alpha, scale, input_scale)
Value elu(FunctionBuilder& b, const Values& v) {
  const Value &x = v[0], &alpha = v[1], &scale = v[2], &input_scale = v[3];
  Value negative = mul(b, unary(b, "stablehlo.exponential_minus_one", mul(b, x, input_scale)),
                       mul(b, alpha, scale));
  return select(b, gt(b, x, like(b, x, 0)), mul(b, x, scale), negative);
}

// elu_backward(grad_output, alpha, scale, input_scale, is_result, self_or_result)
LoweringRule elu_backward() {
  return [](FunctionBuilder& b, const Values& operands, const Attrs& a) {
    bool is_result = a.i("is_result") != 0;
    return pointwise([is_result](FunctionBuilder& b, const Values& v) {
      const Value &g = v[0], &alpha = v[1], &scale = v[2], &input_scale = v[3], &x = v[4];
      Value negcoef = mul(b, alpha, scale);
      Value d = is_result ? mul(b, input_scale, add(b, x, negcoef))
                          : mul(b, mul(b, input_scale, negcoef), exp(b, mul(b, x, input_scale)));
      return select(b, gt(b, x, like(b, x, 0)), mul(b, g, scale), mul(b, g, d));
    })(b, operands, a);
  };
}

// The two halves of `x` along glu's dimension.
std::pair<Value, Value> halves(FunctionBuilder& b, const Value& x, int64_t dim) {
  Dims start(x.shape.rank(), 0), mid = x.shape.dims, end = x.shape.dims;
  mid[dim] /= 2;
  Dims second(x.shape.rank(), 0);
  second[dim] = mid[dim];
  return {slice(b, x, start, mid), slice(b, x, second, end)};
}

// glu(self, dim): first half * sigmoid(second half)
Values glu(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  auto [first, second] = halves(b, x, normalize_dim(a.i("dim"), x.shape.rank()));
  return {convert(b, mul(b, first, unary(b, "stablehlo.logistic", second)), t)};
}

// glu_backward(grad_output, self, dim)
Values glu_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = convert(b, v[0], c), x = convert(b, v[1], c);
  int64_t dim = normalize_dim(a.i("dim"), x.shape.rank());
  auto [first, second] = halves(b, x, dim);
  Value s = unary(b, "stablehlo.logistic", second);
  Value grad_first = mul(b, g, s);
  Value grad_second = mul(b, mul(b, grad_first, first), sub(b, like(b, s, 1), s));
  return {convert(b, concatenate(b, {grad_first, grad_second}, dim), t)};
}

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self, grad_weight)
Values prelu_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims shape = out_shape(a);
  Value g = promote(b, v[0], c, shape), x = promote(b, v[1], c, shape);
  Value w = promote(b, v[2], c, shape);
  Value positive = gt(b, x, like(b, x, 0));
  Value grad_x = select(b, positive, g, mul(b, w, g));
  Value grad_w = select(b, positive, like(b, g, 0), mul(b, x, g));
  return {convert(b, grad_x, t), convert(b, sum_to(b, grad_w, out_shape(a, 1)), out_type(a, 1))};
}

}  // namespace

void register_activation_rules(Registry& r) {
  r.add("hardsigmoid", pointwise([](FunctionBuilder& b, const Values& v) {
          return hardsigmoid(b, v[0]);
        }), all("hardsigmoid"));
  r.add("hardsigmoid_backward", pointwise([](FunctionBuilder& b, const Values& v) {
          const Value &g = v[0], &x = v[1];
          return inside(b, divide(b, g, like(b, g, 6)), x, like(b, x, -3), like(b, x, 3));
        }), all("hardsigmoid_backward"));
  r.add("hardswish", pointwise([](FunctionBuilder& b, const Values& v) {
          return mul(b, v[0], hardsigmoid(b, v[0]));
        }), all("hardswish"));
  r.add("hardswish_backward", pointwise([](FunctionBuilder& b, const Values& v) {
          const Value &g = v[0], &x = v[1];
          Value mid = mul(b, g, add(b, divide(b, x, like(b, x, 3)), like(b, x, 0.5)));
          Value low = select(b, le(b, x, like(b, x, -3)), like(b, g, 0), mid);
          return select(b, ge(b, x, like(b, x, 3)), g, low);
        }), all("hardswish_backward"));
  r.add("hardtanh", pointwise([](FunctionBuilder& b, const Values& v) {
          return minimum(b, maximum(b, v[0], v[1]), v[2]);
        }), all("hardtanh"));
  r.add("hardtanh_backward", pointwise([](FunctionBuilder& b, const Values& v) {
          return inside(b, v[0], v[1], v[2], v[3]);
        }), all("hardtanh_backward"));
  r.add("hardshrink", pointwise([](FunctionBuilder& b, const Values& v) {
          return select(b, dead_zone(b, v[0], v[1]), like(b, v[0], 0), v[0]);
        }), all("hardshrink"));
  r.add("hardshrink_backward", pointwise(shrink_backward), all("hardshrink_backward"));
  r.add("softshrink", pointwise([](FunctionBuilder& b, const Values& v) {
          const Value &x = v[0], &l = v[1];
          // x * 0 in the dead zone, as PyTorch: NaN stays NaN.
          Value below = select(b, lt(b, x, neg(b, l)), add(b, x, l), mul(b, x, like(b, x, 0)));
          return select(b, gt(b, x, l), sub(b, x, l), below);
        }), all("softshrink"));
  r.add("softshrink_backward", pointwise(shrink_backward), all("softshrink_backward"));
  r.add("threshold", pointwise([](FunctionBuilder& b, const Values& v) {
          return select(b, le(b, v[0], v[1]), v[2], v[0]);
        }), all("threshold"));
  r.add("elu", pointwise(elu), all("elu"));
  r.add("elu_backward", elu_backward(), all("elu_backward"));
  r.add("softplus", pointwise([](FunctionBuilder& b, const Values& v) {
          return softplus(b, v[0], v[1], v[2]);
        }), all("softplus"));
  r.add("softplus_backward", pointwise([](FunctionBuilder& b, const Values& v) {
          const Value &g = v[0], &x = v[1], &beta = v[2], &threshold = v[3];
          Value xb = mul(b, x, beta);
          Value z = exp(b, xb);
          Value soft = divide(b, mul(b, g, z), add(b, z, like(b, z, 1)));
          return select(b, gt(b, xb, threshold), g, soft);
        }), all("softplus_backward"));
  r.add("mish", pointwise([](FunctionBuilder& b, const Values& v) {
          Value sp = unary(b, "stablehlo.log_plus_one", exp(b, v[0]));
          return mul(b, v[0], unary(b, "stablehlo.tanh", sp));
        }), all("mish"));
  r.add("logit", pointwise([](FunctionBuilder& b, const Values& v) {
          Value x = v.size() > 1 ? logit_clamp(b, v[0], v[1]) : v[0];
          return unary(b, "stablehlo.log", divide(b, x, sub(b, like(b, x, 1), x)));
        }), all("logit"));
  r.add("logit_backward", pointwise(logit_backward), all("logit_backward"));
  r.add("log_sigmoid", log_sigmoid, all("log_sigmoid_forward"));
  r.add("log_sigmoid_backward", pointwise(log_sigmoid_backward), all("log_sigmoid_backward"));
  r.add("glu", glu, all("glu"));
  r.add("glu_backward", glu_backward, all("glu_backward"));
  r.add("prelu", pointwise([](FunctionBuilder& b, const Values& v) {
          const Value &x = v[0], &w = v[1];
          return select(b, gt(b, x, like(b, x, 0)), x, mul(b, w, x));
        }), {"_prelu_kernel"});
  r.add("prelu_backward", prelu_backward, {"_prelu_kernel_backward"});
}

}  // namespace torchtpu::lowering
