// The matrix exponential by scaling and squaring with the [13/13] Pade approximant (Higham,
// "The scaling and squaring method for the matrix exponential revisited", 2005): each matrix is
// divided by 2^s so its 1-norm is at most theta_13, the approximant r(A) = (V - U)^-1 (V + U) is
// solved by LU, and the result squared s times. s is per matrix; the squaring loop runs for the
// largest s of the batch and leaves a matrix unchanged once its own s squarings are done.
#include <cmath>

#include "lowering/matrix.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// The Pade [13/13] numerator coefficients b_0 .. b_13, and the largest 1-norm it serves to
// double precision.
constexpr double kPade13[] = {64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                              1187353796428800.0,  129060195264000.0,   10559470521600.0,
                              670442572800.0,      33522128640.0,       1323241920.0,
                              40840800.0,          960960.0,            16380.0,
                              182.0,               1.0};
constexpr double kTheta13 = 5.371920351148152;

Value times(FunctionBuilder& b, const Value& x, double c) {
  return binary(b, "stablehlo.multiply", x, full(b, x.shape.type, x.shape.dims, c));
}

Value add(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.add", x, y);
}

// sum_k c[k] * powers[k].
Value combination(FunctionBuilder& b, const std::vector<Value>& powers, const double* c) {
  Value sum = times(b, powers[0], c[0]);
  for (size_t k = 1; k < powers.size(); ++k) sum = add(b, sum, times(b, powers[k], c[k]));
  return sum;
}

// The number of squarings per matrix (s64 of the batch dims): ceil(log2(|A|_1 / theta_13)),
// at least 0 and at most 100 (a NaN or infinite norm gives 100).
Value squarings(FunctionBuilder& b, const Value& x) {
  int64_t r = static_cast<int64_t>(x.shape.rank());
  Value magnitude = modulus(b, x);
  ElementType t = magnitude.shape.type;
  Value columns = reduce(b, magnitude, {r - 2}, constant(b, t, 0), "stablehlo.add");
  Value norm = reduce_extreme(b, columns, {r - 2}, true);
  const Dims& batch = norm.shape.dims;
  Value ratio = binary(b, "stablehlo.divide", norm, full(b, t, batch, kTheta13));
  Value log2 = binary(b, "stablehlo.divide", unary(b, "stablehlo.log", ratio),
                      full(b, t, batch, std::log(2.0)));
  Value s = maximum(b, unary(b, "stablehlo.ceil", log2), full(b, t, batch, 0));
  s = select(b, compare(b, s, full(b, t, batch, 100), "LE"), s, full(b, t, batch, 100));
  return convert(b, s, ElementType::kS64);
}

// 2^-s exactly, as `type` (float32 or float64), from its exponent bits.
Value power_of_half(FunctionBuilder& b, const Value& s, ElementType type) {
  bool f64 = type == ElementType::kF64;
  ElementType bits = f64 ? ElementType::kS64 : ElementType::kS32;
  Value exponent = convert(b, binary(b, "stablehlo.subtract",
                                     full(b, ElementType::kS64, s.shape.dims, f64 ? 1023 : 127), s),
                           bits);
  Value shifted = binary(b, "stablehlo.shift_left", exponent,
                         full(b, bits, s.shape.dims, f64 ? 52 : 23));
  return b.op("stablehlo.bitcast_convert", {shifted}, Shape{type, s.shape.dims});
}

// Half-precision inputs compute in float32.
Value matrix_exp(FunctionBuilder& b, const Value& x) {
  for (int64_t d : x.shape.dims) {
    if (d == 0) return x;
  }
  ElementType t = hlo::is_complex(x.shape.type)         ? x.shape.type
                  : x.shape.type == ElementType::kF64 ? ElementType::kF64
                                                      : ElementType::kF32;
  ElementType real = hlo::is_complex(t) ? real_part(t) : t;
  Value input = convert(b, x, t);
  Dims batch = batch_dims(input);
  int64_t n = dim(input, 1);
  Value s = squarings(b, input);
  Value a = binary(b, "stablehlo.multiply", input,
                   leading_to(b, convert(b, power_of_half(b, s, real), t), input.shape.dims));
  Value eye = identity(b, t, batch, n);
  Value a2 = batched_matmul(b, a, a), a4 = batched_matmul(b, a2, a2),
        a6 = batched_matmul(b, a4, a2);
  const double* c = kPade13;
  double odd_high[] = {c[13], c[11], c[9]}, odd_low[] = {c[7], c[5], c[3], c[1]};
  double even_high[] = {c[12], c[10], c[8]}, even_low[] = {c[6], c[4], c[2], c[0]};
  Value u = batched_matmul(b, a6, combination(b, {a6, a4, a2}, odd_high));
  u = batched_matmul(b, a, add(b, u, combination(b, {a6, a4, a2, eye}, odd_low)));
  Value v = batched_matmul(b, a6, combination(b, {a6, a4, a2}, even_high));
  v = add(b, v, combination(b, {a6, a4, a2, eye}, even_low));
  Value r = solve(b, binary(b, "stablehlo.subtract", v, u), add(b, v, u));
  Dims all_batch(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) all_batch[i] = static_cast<int64_t>(i);
  Value most = reduce(b, s, all_batch, constant(b, ElementType::kS64, 0), "stablehlo.maximum");
  std::vector<Value> out = while_loop(
      b, {constant(b, ElementType::kS64, 0), r},
      [&](FunctionBuilder& c, const std::vector<Value>& state) {
        return std::vector<Value>{compare(c, state[0], most, "LT")};
      },
      [&](FunctionBuilder& c, const std::vector<Value>& state) {
        const Value &i = state[0], &x = state[1];
        Value more = compare(c, broadcast_in_dim(c, i, batch, {}), s, "LT");
        Value squared = select(c, leading_to(c, more, x.shape.dims), batched_matmul(c, x, x), x);
        return std::vector<Value>{add(c, i, constant(c, ElementType::kS64, 1)), squared};
      });
  return out[1];
}

}  // namespace

void register_matrix_function_rules(Registry& r) {
  r.add(
      "linalg_matrix_exp",
      into_result_types([](FunctionBuilder& b, const Values& v, const Attrs&) -> Values {
        return {matrix_exp(b, v[0])};
      }),
      {"linalg_matrix_exp", "linalg_matrix_exp.out"});
}

}  // namespace torchtpu::lowering
