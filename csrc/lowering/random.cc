// Random numbers from a generator state that lives on the device: every rule takes the state
// (ui64[2], ThreeFry) as operand 0 and returns (values..., new state) with the state last.
#include <cmath>
#include <limits>

#include "lowering/helpers.h"
#include "lowering/num.h"
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
  return make_complex(b, re, im, t);
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

// Draws by rejection: `values` (each element's state, one shape) start as given, `done` marks the
// elements with nothing to draw; each round, `step` proposes next values for every element from
// the generator state (advancing it) and says which elements finish with them. Elements already
// done keep theirs. Rounds run until every element is done (a bounded number, as a safeguard).
using Step = std::function<std::pair<std::vector<Value>, Value>(
    FunctionBuilder&, Value& state, const std::vector<Value>& values)>;
constexpr int64_t kMostRounds = 100000;

std::pair<std::vector<Value>, Value> draw_until_done(FunctionBuilder& b, const Value& state,
                                                     const std::vector<Value>& values,
                                                     const Value& done, const Step& step) {
  std::vector<Value> init = {constant(b, ElementType::kS64, 0), state, done};
  init.insert(init.end(), values.begin(), values.end());
  Dims all;
  for (size_t d = 0; d < done.shape.rank(); ++d) all.push_back(static_cast<int64_t>(d));
  std::vector<Value> out = while_loop(
      b, init,
      [&](FunctionBuilder& c, const std::vector<Value>& s) {
        Value pending = reduce(c, unary(c, "stablehlo.not", s[2]), all,
                               constant(c, ElementType::kPred, 0), "stablehlo.or");
        Value rounds_left = compare(c, s[0], constant(c, ElementType::kS64, kMostRounds), "LT");
        return std::vector<Value>{b_and(c, pending, rounds_left)};
      },
      [&](FunctionBuilder& c, const std::vector<Value>& s) {
        Value rng = s[1];
        std::vector<Value> now(s.begin() + 3, s.end());
        auto [next, finished] = step(c, rng, now);
        std::vector<Value> result = {
            binary(c, "stablehlo.add", s[0], constant(c, ElementType::kS64, 1)), rng,
            b_or(c, s[2], finished)};
        for (size_t i = 0; i < now.size(); ++i) result.push_back(select(c, s[2], now[i], next[i]));
        return result;
      });
  return {std::vector<Value>(out.begin() + 3, out.end()), out[1]};
}

// The logarithm of Gamma(alpha, 1) draws, by Marsaglia and Tsang's method; alpha < 1 draws
// Gamma(alpha + 1) * u^(1 / alpha). An alpha that is NaN or <= 0 gives NaN; +inf gives +inf.
Bits log_gamma(FunctionBuilder& b, const Value& state, const Value& alpha) {
  const Dims& dims = alpha.shape.dims;
  Num a{&b, alpha};
  Value infinite = cmp(a, "EQ", std::numeric_limits<double>::infinity());
  Value done = either(a, unary(b, "stablehlo.not", cmp(a, "GT", 0.0)), infinite);
  Num boosted = where(cmp(a, "LT", 1.0), a + 1.0, a);
  Num d = boosted - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  Num start = where(infinite, a.k(std::numeric_limits<double>::infinity()),
                    a.k(std::numeric_limits<double>::quiet_NaN()));
  auto [drawn, after] = draw_until_done(
      b, state, {start.v}, done,
      [&](FunctionBuilder& r, Value& rng, const std::vector<Value>&) {
        Num d_r = d.in(r), c_r = c.in(r);
        Bits z = standard_normal(r, rng, alpha.shape.type, dims);
        Bits u = uniform_open(r, z.state, alpha.shape.type, dims);
        rng = u.state;
        Num x{&r, z.bits}, v = 1.0 + c_r * x;
        Num cube = v * v * v, log_cube = log(cube);
        Value accept = both(x, cmp(v, "GT", 0.0),
                            cmp(log(Num{&r, u.bits}), "LT",
                                0.5 * x * x + d_r - d_r * cube + d_r * log_cube));
        return std::make_pair(std::vector<Value>{(log(d_r) + log_cube).v}, accept);
      });
  Bits u = uniform_open(b, after, alpha.shape.type, dims);
  Num boost = where(cmp(a, "LT", 1.0), log(Num{&b, u.bits}) / a, 0.0);
  return {u.state, (Num{&b, drawn[0]} + boost).v};
}

// The smallest positive normal value of `type`.
double smallest_normal(ElementType t) {
  switch (t) {
    case ElementType::kF64: return std::numeric_limits<double>::min();
    case ElementType::kF16: return std::ldexp(1.0, -14);
    default: return std::numeric_limits<float>::min();
  }
}

// _standard_gamma(state, alpha): Gamma(alpha, 1) draws, at least the type's smallest normal
// value, as on the CPU (which gives that for an alpha that is NaN or <= 0).
Values standard_gamma(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  Bits g = log_gamma(b, v[0], convert(b, v[1], c));
  Num x = exp(Num{&b, g.bits});
  double tiny = smallest_normal(t);
  return {convert(b, where(cmp(x, "GT", tiny), x, tiny).v, t), g.state};
}

// _sample_dirichlet(state, alpha): Gamma draws normalized along the last dimension, in
// logarithms (a softmax), so small alphas do not underflow. As on the CPU, each draw counts as at
// least float64's smallest normal value, and each result is at least the type's.
Values dirichlet(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  const Dims& dims = v[1].shape.dims;
  Bits g = log_gamma(b, v[0], convert(b, v[1], c));
  Num x{&b, g.bits};
  double floor = std::log(std::numeric_limits<double>::min());
  x = where(cmp(x, "GT", floor), x, floor);
  Dims last = {static_cast<int64_t>(dims.size()) - 1};
  Dims keep_axes;
  for (size_t d = 0; d + 1 < dims.size(); ++d) keep_axes.push_back(static_cast<int64_t>(d));
  Num top{&b, broadcast_in_dim(b, reduce_extreme(b, x.v, last, true), dims, keep_axes)};
  Num e = exp(x - top);
  Num total{&b, broadcast_in_dim(b, reduce(b, e.v, last, constant(b, c, 0), "stablehlo.add"),
                                 dims, keep_axes)};
  Num p = e / total;
  double tiny = smallest_normal(t);
  return {convert(b, where(cmp(p, "GT", tiny), p, tiny).v, t), g.state};
}

// log(rate^k e^-rate / k!) for integer-valued k >= 0, accurate in float32 for large rates: for
// k >= 10 through Stirling's series for log k!, with k log(k / rate) as a log1p.
Num log_poisson_pmf(const Num& k, const Num& rate) {
  Num big = where(cmp(k, "LT", 10.0), 10.0, k);
  Num series = 1.0 / (12.0 * big) - 1.0 / (360.0 * big * big * big);
  Num stirling = (k - rate) - k * log1p((k - rate) / rate) - 0.5 * log(2.0 * M_PI * big) - series;
  Num exact = -rate + k * log(rate) - (k + 1.0).op("chlo.lgamma");
  return where(cmp(k, "LT", 10.0), exact, stirling);
}

// poisson(state, rates): Knuth's product of uniforms below rate 10, Hormann's transformed
// rejection with squeeze (PTRS) from 10 on. A NaN or negative rate gives NaN (the kernel raises
// for it at the next wait), +inf gives +inf.
Values poisson(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  Num rate{&b, convert(b, v[1], c)};
  const Dims& dims = rate.v.shape.dims;
  Value small = cmp(rate, "LT", 10.0);
  Value done = either(rate, unary(b, "stablehlo.not", cmp(rate, "GE", 0.0)),
                      cmp(rate, "EQ", std::numeric_limits<double>::infinity()));
  Num start = where(done, rate, 0.0), limit = exp(-rate);
  Num big = where(small, 10.0, rate);  // PTRS's constants, finite for every rate
  Num spread = 0.931 + 2.53 * sqrt(big), shift = -0.059 + 0.02483 * spread;
  Num inv_alpha = 1.1239 + 1.1328 / (spread - 3.4), squeeze = 0.9277 - 3.6224 / (spread - 2.0);
  auto [drawn, after] = draw_until_done(
      b, v[0], {start.v, rate.k(1.0).v}, done,
      [&](FunctionBuilder& r, Value& rng, const std::vector<Value>& now) {
        Bits u = uniform01(r, rng, c, dims), w = uniform_open(r, u.state, c, dims);
        rng = w.state;
        Num count{&r, now[0]}, product = Num{&r, now[1]} * Num{&r, w.bits};
        Num lam = rate.in(r), sb = spread.in(r), sa = shift.in(r), vw{&r, w.bits};
        // Knuth: the count of uniforms whose product stays above e^-rate.
        Value below = cmp(product, "LE", limit.in(r));
        Num knuth = where(below, count, count + 1.0);
        // PTRS: a candidate k from u, accepted by a quick test or by the pmf.
        Num centered = Num{&r, u.bits} - 0.5, us = 0.5 - abs(centered);
        Num k = floor((2.0 * sa / us + sb) * centered + lam + 0.43);
        Value quick = both(k, cmp(us, "GE", 0.07), cmp(vw, "LE", squeeze.in(r)));
        Value rejected = either(k, cmp(k, "LT", 0.0),
                                both(k, cmp(us, "LT", 0.013), cmp(vw, "GT", us)));
        Num bound = log(vw) + log(inv_alpha.in(r)) - log(sa / (us * us) + sb);
        Value fits = cmp(bound, "LE", log_poisson_pmf(where(cmp(k, "LT", 0.0), 0.0, k), lam));
        Value accept = either(k, quick, both(k, unary(r, "stablehlo.not", rejected), fits));
        return std::make_pair(std::vector<Value>{where(small, knuth, k).v,
                                                 product.v},
                              select(r, small, below, accept));
      });
  return {convert(b, drawn[0], t), after};
}

// log k! minus Stirling's approximation (k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2 of it.
Num stirling_tail(const Num& k) {
  Num z = k + 1.0, big = where(cmp(k, "LT", 10.0), 10.0, z);
  Num series = 1.0 / (12.0 * big) - 1.0 / (360.0 * big * big * big) +
               1.0 / (1260.0 * big * big * big * big * big);
  Num exact = z.op("chlo.lgamma") - (k + 0.5) * log(z) + z - 0.5 * std::log(2 * M_PI);
  return where(cmp(k, "LT", 10.0), exact, series);
}

// binomial(state, count, prob): successes in floor(count) trials. With q the smaller of p and
// 1 - p (a draw for 1 - p is count minus one for p): the sum of geometric waiting times while
// count * q < 10, Hormann's transformed rejection (BTRS) from there. A count <= 0 or p <= 0 gives
// 0, p >= 1 gives count, NaN gives NaN.
Values binomial(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = float_for(t);
  Num n = floor(Num{&b, convert(b, v[1], c)}), p{&b, convert(b, v[2], c)};
  const Dims& dims = n.v.shape.dims;
  Value flip = cmp(p, "GT", 0.5);
  Num q = where(flip, 1.0 - p, p);
  Value none = either(n, cmp(n, "LE", 0.0), cmp(p, "LE", 0.0));
  Value nan = either(n, cmp(n, "NE", n), cmp(p, "NE", p));
  Value done = either(n, either(n, none, cmp(p, "GE", 1.0)), nan);
  Num start = where(nan, n.k(std::numeric_limits<double>::quiet_NaN()),
                    where(none, 0.0, where(cmp(p, "GE", 1.0), n, 0.0)));
  Value inversion = cmp(n * q, "LT", 10.0);
  Num log_failure = log1p(-q);
  // BTRS's constants (finite for every element; used only where count * q >= 10).
  Num qb = where(inversion, 0.5, q), nb = where(inversion, 40.0, n);
  Num spq = sqrt(nb * qb * (1.0 - qb)), bb = 1.15 + 2.53 * spq;
  Num ab = -0.0873 + 0.0248 * bb + 0.01 * qb, cb = nb * qb + 0.5, vr = 0.92 - 4.2 / bb;
  Num ratio = qb / (1.0 - qb), alpha = (2.83 + 5.1 / bb) * spq, mode = floor((nb + 1.0) * qb);
  Num at_mode = (mode + 0.5) * log((mode + 1.0) / (ratio * (nb - mode + 1.0))) +
                stirling_tail(mode) + stirling_tail(nb - mode);
  auto [drawn, after] = draw_until_done(
      b, v[0], {start.v, n.k(0.0).v}, done,
      [&](FunctionBuilder& r, Value& rng, const std::vector<Value>& now) {
        Bits u = uniform01(r, rng, c, dims), w = uniform_open(r, u.state, c, dims);
        rng = w.state;
        Num count{&r, now[0]}, waited{&r, now[1]}, vw{&r, w.bits}, nr = n.in(r);
        // Inversion: geometric waiting times for successes until they pass count.
        Num next_wait = waited + (log(vw) / log_failure.in(r)).op("stablehlo.ceil");
        Value past = cmp(next_wait, "GT", nr);
        Num successes = where(past, count, count + 1.0);
        // BTRS: a candidate k from u, accepted by a quick test or by the pmf's ratio to the mode.
        Num nb_r = nb.in(r), sb = bb.in(r), sa = ab.in(r), rr = ratio.in(r);
        Num centered = Num{&r, u.bits} - 0.5, us = 0.5 - abs(centered);
        Num k = floor((2.0 * sa / us + sb) * centered + cb.in(r));
        Value inside = both(k, cmp(k, "GE", 0.0), cmp(k, "LE", nb_r));
        Num kk = where(inside, k, 0.0);
        Value quick = both(k, cmp(us, "GE", 0.07), cmp(vw, "LE", vr.in(r)));
        Num bound = at_mode.in(r) +
                    (nb_r + 1.0) * log((nb_r - mode.in(r) + 1.0) / (nb_r - kk + 1.0)) +
                    (kk + 0.5) * log(rr * (nb_r - kk + 1.0) / (kk + 1.0)) - stirling_tail(kk) -
                    stirling_tail(nb_r - kk);
        Num test = log(vw * alpha.in(r) / (sa / (us * us) + sb));
        Value accept = both(k, inside, either(k, quick, cmp(test, "LE", bound)));
        return std::make_pair(
            std::vector<Value>{where(inversion, successes, k).v, next_wait.v},
            select(r, inversion, past, accept));
      });
  Num x{&b, drawn[0]};
  Num result = where(both(x, flip, unary(b, "stablehlo.not", done)), n - x, x);
  return {convert(b, result.v, t), after};
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
  r.add("rng_gamma", standard_gamma);
  r.add("rng_dirichlet", dirichlet);
  r.add("rng_poisson", poisson);
  r.add("rng_binomial", binomial);
  r.add("rng_bernoulli", bernoulli);
  r.add("rng_integers", random_integers);
  r.add("rng_dropout", dropout);
}

}  // namespace torchtpu::lowering
