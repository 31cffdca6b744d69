// Random numbers from a generator state that lives on the device: every rule takes the state
// (ui64[2], ThreeFry) as operand 0 and returns (values..., new state) with the state last.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

struct Bits {
  Value state;
  Value bits;
};

Bits random_bits(FunctionBuilder& b, const Value& state, ElementType type, const Dims& dims) {
  auto out = b.ops("stablehlo.rng_bit_generator", {state}, {state.shape, Shape{type, dims}},
                   "rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>");
  return {out[0], out[1]};
}

// Uniform [0, 1) in float32 or float64, from the mantissa bits.
Bits uniform01(FunctionBuilder& b, const Value& state, ElementType type, const Dims& dims) {
  bool wide = type == ElementType::kF64;
  ElementType bits_type = wide ? ElementType::kU64 : ElementType::kU32;
  Bits r = random_bits(b, state, bits_type, dims);
  int shift = wide ? 12 : 9;
  double one_bits = wide ? 4607182418800017408.0 : 1065353216.0;  // bit patterns of 1.0
  Value mantissa = b.op("stablehlo.shift_right_logical",
                        {r.bits, full(b, bits_type, dims, shift)}, r.bits.shape);
  Value ones = wide ? b.constant(Shape{bits_type, {}}, "4607182418800017408")
                    : b.constant(Shape{bits_type, {}}, "1065353216");
  (void)one_bits;
  Value pattern = b.op("stablehlo.or", {mantissa, broadcast_in_dim(b, ones, dims, {})},
                       r.bits.shape);
  ElementType ft = wide ? ElementType::kF64 : ElementType::kF32;
  Value in_one_two = b.op("stablehlo.bitcast_convert", {pattern}, Shape{ft, dims});
  return {r.state, binary(b, "stablehlo.subtract", in_one_two, full(b, ft, dims, 1.0))};
}

ElementType float_for(ElementType t) { return t == ElementType::kF64 ? t : ElementType::kF32; }

// Rounding to float16/bfloat16 must not turn values just below `to` into `to`.
Value below(FunctionBuilder& b, const Value& x, const Value& from, const Value& to,
            ElementType t) {
  Value r = convert(b, x, t);
  if (t == ElementType::kF32 || t == ElementType::kF64) return r;
  Value hi = convert(b, to, t);
  Value next_below = b.op("chlo.next_after", {hi, convert(b, from, t)}, hi.shape);
  return select(b, compare(b, r, hi, "GE"), next_below, r);
}

// A complex output draws its real and imaginary parts as pairs of reals (a trailing dim of 2).
Dims draw_dims(const Dims& dims, ElementType t) {
  Dims d = dims;
  if (hlo::is_complex(t)) d.push_back(2);
  return d;
}

// Pairs of reals (last dim 2) as complex numbers of type `t`; reals pass through.
Value pairs_to(FunctionBuilder& b, const Value& x, ElementType t, const Dims& dims) {
  if (!hlo::is_complex(t)) return x;
  Dims start(x.shape.rank(), 0), limit = x.shape.dims;
  limit.back() = 1;
  Value re = reshape(b, slice(b, x, start, limit), dims);
  start.back() = 1;
  limit.back() = 2;
  Value im = reshape(b, slice(b, x, start, limit), dims);
  return b.op("stablehlo.complex", {re, im}, Shape{t, dims});
}

// uniform_(state, from, to): attrs type, shape. A complex tensor gets both parts in [from, to).
Values uniform(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), part = real_part(t), c = float_for(part);
  Dims dims = out_shape(a), drawn = draw_dims(dims, t);
  Bits u = uniform01(b, v[0], c, drawn);
  Value from = splat(b, v[1], c, drawn), to = splat(b, v[2], c, drawn);
  Value x = binary(b, "stablehlo.add", from,
                   binary(b, "stablehlo.multiply", binary(b, "stablehlo.subtract", to, from),
                          u.bits));
  return {pairs_to(b, below(b, x, from, to, part), t, dims), u.state};
}

// Uniform in (0, 1): [0, 1) moved up by half its step, so that its logarithm is finite.
Bits uniform_open(FunctionBuilder& b, const Value& state, ElementType type, const Dims& dims) {
  Bits u = uniform01(b, state, type, dims);
  double half_step = type == ElementType::kF64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  return {u.state, binary(b, "stablehlo.add", u.bits, full(b, type, dims, half_step))};
}

// Standard normal values, by Box-Muller.
Bits standard_normal(FunctionBuilder& b, const Value& state, ElementType type, const Dims& dims) {
  Bits u1 = uniform01(b, state, type, dims);
  Bits u2 = uniform01(b, u1.state, type, dims);
  Value one = full(b, type, dims, 1.0);
  Value radius = unary(b, "stablehlo.sqrt",
                       binary(b, "stablehlo.multiply", full(b, type, dims, -2.0),
                              unary(b, "stablehlo.log",
                                    binary(b, "stablehlo.subtract", one, u1.bits))));
  Value angle = binary(b, "stablehlo.multiply", full(b, type, dims, 2 * M_PI), u2.bits);
  return {u2.state, binary(b, "stablehlo.multiply", radius, unary(b, "stablehlo.cosine", angle))};
}

// mean + std * z, for scalar operands `mean` and `std`.
Value shift_scale(FunctionBuilder& b, const Value& z, const Value& mean, const Value& std) {
  ElementType c = z.shape.type;
  return binary(b, "stablehlo.add", splat(b, mean, c, z.shape.dims),
                binary(b, "stablehlo.multiply", splat(b, std, c, z.shape.dims), z));
}

// normal_(state, mean, std). A complex tensor, as in PyTorch, gets parts of mean `mean` and
// variance std^2 / 2 each.
Values normal(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), part = real_part(t), c = float_for(part);
  Dims dims = out_shape(a), drawn = draw_dims(dims, t);
  Bits z = standard_normal(b, v[0], c, drawn);
  Value std = v[2];
  if (hlo::is_complex(t)) std = binary(b, "stablehlo.multiply", convert(b, std, c),
                                       constant(b, c, M_SQRT1_2));
  return {pairs_to(b, convert(b, shift_scale(b, z.bits, v[1], std), part), t, dims), z.state};
}

// log_normal_(state, mean, std): exp of normal values.
Values log_normal(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  Bits z = standard_normal(b, v[0], c, out_shape(a));
  return {convert(b, unary(b, "stablehlo.exponential", shift_scale(b, z.bits, v[1], v[2])), t),
          z.state};
}

// exponential_(state, lambda): -log(u) / lambda, never 0 (u < 1).
Values exponential(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  Dims dims = out_shape(a);
  Bits u = uniform_open(b, v[0], c, dims);
  Value x = binary(b, "stablehlo.divide", unary(b, "stablehlo.negate",
                                                unary(b, "stablehlo.log", u.bits)),
                   splat(b, v[1], c, dims));
  return {convert(b, x, t), u.state};
}

// geometric_(state, p): trials up to the first success, ceil(log(u) / log(1 - p)), at least 1.
Values geometric(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  Dims dims = out_shape(a);
  Bits u = uniform_open(b, v[0], c, dims);
  Value failure = unary(b, "stablehlo.log_plus_one",
                        unary(b, "stablehlo.negate", splat(b, v[1], c, dims)));
  Value x = unary(b, "stablehlo.ceil", binary(b, "stablehlo.divide",
                                              unary(b, "stablehlo.log", u.bits), failure));
  x = binary(b, "stablehlo.maximum", x, full(b, c, dims, 1.0));
  return {convert(b, x, t), u.state};
}

// cauchy_(state, median, sigma): median + sigma * tan(pi * (u - 1/2)).
Values cauchy(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  Dims dims = out_shape(a);
  Bits u = uniform_open(b, v[0], c, dims);
  Value angle = binary(b, "stablehlo.multiply", full(b, c, dims, M_PI),
                       binary(b, "stablehlo.subtract", u.bits, full(b, c, dims, 0.5)));
  Value tan = binary(b, "stablehlo.divide", unary(b, "stablehlo.sine", angle),
                     unary(b, "stablehlo.cosine", angle));
  return {convert(b, shift_scale(b, tan, v[1], v[2]), t), u.state};
}

// bernoulli_(state, p): p a scalar or a tensor of probabilities.
Values bernoulli(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Dims dims = out_shape(a);
  ElementType c = v[1].shape.type == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
  Bits u = uniform01(b, v[0], c, dims);
  return {convert(b, compare(b, u.bits, promote(b, v[1], c, dims), "LT"), t), u.state};
}

// random_(state, from, to): integers in [from, to) (to - from must be positive).
Values random_integers(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Dims dims = out_shape(a);
  Bits r = random_bits(b, v[0], ElementType::kU64, dims);
  Value from = convert(b, v[1], ElementType::kS64), to = convert(b, v[2], ElementType::kS64);
  Value range = convert(b, binary(b, "stablehlo.subtract", to, from), ElementType::kU64);
  Value offset = binary(b, "stablehlo.remainder", r.bits, broadcast_to(b, range, dims));
  Value x = binary(b, "stablehlo.add", convert(b, offset, ElementType::kS64),
                   broadcast_to(b, from, dims));
  return {convert(b, x, t), r.state};
}

// native_dropout(state, input, p): (output, mask); kept values are scaled by 1 / (1 - p). As in
// PyTorch, input * mask * scale: a dropped NaN stays NaN, a dropped negative value gives -0.
Values dropout(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Dims dims = out_shape(a);
  Bits u = uniform01(b, v[0], float_for(c), dims);
  Value keep_probability = binary(b, "stablehlo.subtract", constant(b, float_for(c), 1.0),
                                  convert(b, v[2], float_for(c)));
  Value keep = compare(b, u.bits, broadcast_to(b, keep_probability, dims), "LT");
  Value x = convert(b, v[1], c);
  Value scale = binary(b, "stablehlo.divide", full(b, c, dims, 1.0),
                       broadcast_to(b, convert(b, keep_probability, c), dims));
  // x * 0 written out, not folded into a select of 0: XLA would rewrite x * convert(mask).
  Value y = select(b, keep, binary(b, "stablehlo.multiply", x, scale),
                   binary(b, "stablehlo.multiply", x, full(b, c, dims, 0)));
  return {convert(b, y, t), convert(b, keep, out_type(a, 1)), u.state};
}

}  // namespace

void register_random_rules(Registry& r) {
  r.add("rng_uniform", uniform);
  r.add("rng_normal", normal);
  r.add("rng_log_normal", log_normal);
  r.add("rng_exponential", exponential);
  r.add("rng_geometric", geometric);
  r.add("rng_cauchy", cauchy);
  r.add("rng_bernoulli", bernoulli);
  r.add("rng_integers", random_integers);
  r.add("rng_dropout", dropout);
}

}  // namespace torchtpu::lowering
