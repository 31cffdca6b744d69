// Elementwise arithmetic. Every rule takes attrs `type` (the result type, already promoted by
// PyTorch's rules) and `shape` (the broadcast result shape). Like PyTorch's kernels, float16 and
// bfloat16 compute in float32 and round once at the end.
#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

struct Operands {
  ElementType declared;  // PyTorch's computation type
  ElementType type;      // what it computes in: float32 for float16 and bfloat16
  Dims shape;
  Values v;  // converted and broadcast
};

Operands prepare_as(FunctionBuilder& b, const Values& operands, const Attrs& attrs,
                    ElementType type);

// The operands in PyTorch's computation type (its result_type of the operands, or `type`).
Operands prepare(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  ElementType type = attrs.has("compute_type") ? attrs.type("compute_type") : attrs.type("type");
  return prepare_as(b, operands, attrs, type);
}

Operands prepare_as(FunctionBuilder& b, const Values& operands, const Attrs& attrs,
                    ElementType type) {
  Operands p{type, opmath(type), attrs.ints("shape"), {}};
  for (const Value& x : operands) p.v.push_back(promote(b, x, p.type, p.shape));
  return p;
}

Values result(FunctionBuilder& b, const Value& v, const Attrs& attrs) {
  return {convert(b, v, attrs.type("type"))};
}

// add/sub: operands [a, b] or [a, b, alpha]: a ± alpha * b. As on PyTorch's CPU, alpha * b is
// rounded to the result type before the sum.
Value scaled_second(FunctionBuilder& b, const Operands& p) {
  if (p.v.size() < 3) return p.v[1];
  Value scaled = binary(b, "stablehlo.multiply", p.v[1], p.v[2]);
  ElementType type = p.declared;
  if (type == p.type) return scaled;
  // reduce_precision, not a convert round trip: XLA folds convert pairs away.
  int exponent = type == ElementType::kF16 ? 5 : 8, mantissa = type == ElementType::kF16 ? 10 : 7;
  return b.op("stablehlo.reduce_precision", {scaled}, scaled.shape,
              "exponent_bits = " + std::to_string(exponent) + " : i32, mantissa_bits = " +
                  std::to_string(mantissa) + " : i32");
}

Values add(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  Operands p = prepare(b, operands, attrs);
  return result(b, binary(b, "stablehlo.add", p.v[0], scaled_second(b, p)), attrs);
}

Values sub(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  bool a_bool = operands[0].shape.type == ElementType::kPred;
  bool b_bool = operands[1].shape.type == ElementType::kPred;
  if (a_bool && b_bool) {
    throw Refused("Subtraction, the `-` operator, with two bool tensors is not supported. "
                  "Use the `^` or `logical_xor()` operator instead.", true);
  }
  if (a_bool || b_bool) {
    throw Refused("Subtraction, the `-` operator, with a bool tensor is not supported. If "
                  "you are trying to invert a mask, use the `~` or `logical_not()` operator "
                  "instead.", true);
  }
  Operands p = prepare(b, operands, attrs);
  return result(b, binary(b, "stablehlo.subtract", p.v[0], scaled_second(b, p)), attrs);
}

Values mul(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  Operands p = prepare(b, operands, attrs);
  return result(b, binary(b, "stablehlo.multiply", p.v[0], p.v[1]), attrs);
}

Value trunc_float(FunctionBuilder& b, const Value& x) {
  Value negative = compare(b, x, full(b, x.shape.type, x.shape.dims, 0), "LT");
  return select(b, negative, unary(b, "stablehlo.ceil", x), unary(b, "stablehlo.floor", x));
}

// PyTorch's floor division of floats (c10::div_floor_floating): exact where floor(a / b) is not.
Value floor_div_float(FunctionBuilder& b, const Value& x, const Value& y) {
  ElementType t = x.shape.type;
  const Dims& d = x.shape.dims;
  Value zero = full(b, t, d, 0), one = full(b, t, d, 1), half = full(b, t, d, 0.5);
  Value quotient = binary(b, "stablehlo.divide", x, y);
  Value mod = binary(b, "stablehlo.remainder", x, y);
  Value div = binary(b, "stablehlo.divide", binary(b, "stablehlo.subtract", x, mod), y);
  Value signs_differ = compare(b, compare(b, y, zero, "LT"), compare(b, mod, zero, "LT"), "NE");
  Value adjust = b.op("stablehlo.and", {compare(b, mod, zero, "NE"), signs_differ},
                      signs_differ.shape);
  div = select(b, adjust, binary(b, "stablehlo.subtract", div, one), div);
  Value floored = unary(b, "stablehlo.floor", div);
  Value round_up = compare(b, binary(b, "stablehlo.subtract", div, floored), half, "GT");
  floored = select(b, round_up, binary(b, "stablehlo.add", floored, one), floored);
  // A zero quotient keeps the sign of a / b.
  Value signed_zero = binary(b, "stablehlo.multiply", zero, quotient);
  Value result = select(b, compare(b, div, zero, "EQ"), signed_zero, floored);
  return select(b, compare(b, y, zero, "EQ"), quotient, result);
}

Value floor_div_int(FunctionBuilder& b, const Value& x, const Value& y) {
  Value q = binary(b, "stablehlo.divide", x, y);
  if (!hlo::is_signed_integer(x.shape.type)) return q;
  const Dims& d = x.shape.dims;
  Value zero = full(b, x.shape.type, d, 0);
  Value r = binary(b, "stablehlo.remainder", x, y);
  Value signs_differ = compare(b, compare(b, r, zero, "LT"), compare(b, y, zero, "LT"), "NE");
  Value adjust = b.op("stablehlo.and", {compare(b, r, zero, "NE"), signs_differ},
                      signs_differ.shape);
  return select(b, adjust, binary(b, "stablehlo.subtract", q, full(b, x.shape.type, d, 1)), q);
}

const char* torch_dtype_name(ElementType type) {
  switch (type) {
    case ElementType::kPred: return "Bool";
    case ElementType::kC64: return "ComplexFloat";
    case ElementType::kC128: return "ComplexDouble";
    default: return hlo::short_name(type);
  }
}

// attrs.rounding_mode: absent (true division), "trunc" or "floor".
Values div(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  std::string mode = attrs.has("rounding_mode") ? attrs.s("rounding_mode") : "true";
  ElementType compute = attrs.has("compute_type") ? attrs.type("compute_type") : attrs.type("type");
  if (mode != "true" && (compute == ElementType::kPred || hlo::is_complex(compute))) {
    throw Refused("\"div_" + mode + "_tpu\" not implemented for '" +
                      torch_dtype_name(compute) + "'");
  }
  bool integral = !hlo::is_floating(compute) && !hlo::is_complex(compute);
  if (mode == "true" && integral) compute = attrs.type("type");  // integers divide as floats
  Operands p = prepare_as(b, operands, attrs, compute);
  bool floating = hlo::is_floating(p.type) || hlo::is_complex(p.type);
  if (mode == "floor") {
    return result(b, floating ? floor_div_float(b, p.v[0], p.v[1]) : floor_div_int(b, p.v[0], p.v[1]),
                  attrs);
  }
  Value q = divide(b, p.v[0], p.v[1]);
  if (mode == "trunc" && floating) q = trunc_float(b, q);
  return result(b, q, attrs);
}

// rsub(self, other, alpha): other - alpha * self, with sub's checks and rounding.
Values rsub(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  Values swapped = operands;
  std::swap(swapped[0], swapped[1]);
  return sub(b, swapped, attrs);
}

// floor_divide(self, other): div with rounding_mode "floor".
Values floor_divide(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  Attrs floor = attrs;
  floor.set("rounding_mode", std::string("floor"));
  return div(b, operands, floor);
}

// The value converted to `type` and broadcast to `shape`: copy_, fill_, expand.
Values cast(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  return {promote(b, operands[0], attrs.type("type"), attrs.ints("shape"))};
}

// A tensor's lazy conjugate and negative bits applied to its value (attrs conj, neg).
Values resolve(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  Value v = operands[0];
  if (attrs.i("conj")) v = conjugate(b, v);
  if (attrs.i("neg")) v = unary(b, "stablehlo.negate", v);
  return {v};
}

}  // namespace

void register_elementwise_rules(Registry& r) {
  r.add("resolve", resolve);
  // conj_physical writes the conjugate's values (conj only sets the lazy bit).
  r.add("conj_physical",
        [](FunctionBuilder& b, const Values& v, const Attrs& a) {
          return Values{convert(b, conjugate(b, v[0]), out_type(a))};
        },
        {"conj_physical.out", "conj_physical_", "_conj_physical"});
  r.elementwise("add", add, {"add.Tensor", "add_.Tensor", "add.out", "add.Scalar", "add_.Scalar"});
  r.elementwise("sub", sub, {"sub.Tensor", "sub_.Tensor", "sub.out", "sub.Scalar", "sub_.Scalar"});
  r.elementwise("mul", mul, {"mul.Tensor", "mul_.Tensor", "mul.out", "mul.Scalar", "mul_.Scalar"});
  r.elementwise("div", div,
        {"div.Tensor", "div_.Tensor", "div.out", "div.Tensor_mode", "div_.Tensor_mode",
         "div.out_mode", "div.Scalar", "div_.Scalar", "div.Scalar_mode", "div_.Scalar_mode"});
  r.elementwise("rsub", rsub, {"rsub.Tensor", "rsub.Scalar"});
  r.elementwise("floor_divide", floor_divide,
                {"floor_divide", "floor_divide_.Tensor", "floor_divide.out", "floor_divide.Scalar",
                 "floor_divide_.Scalar", "floor_divide.Scalar_out"});
  r.add("cast", cast);
}

}  // namespace torchtpu::lowering
