// Special functions (torch.special, i0, igamma, polygamma, the orthogonal polynomials). They are
// built from a few shared pieces: an arithmetic wrapper (Num) so formulas read as formulas,
// power series and asymptotic sums summed in a stablehlo.while, and one three-term recurrence
// for the polynomials. The Bessel-type functions and erfcx compute in float64 (series need the
// headroom) and round once; the polynomials compute in the input's type, as PyTorch's CPU does.
#include <cmath>

#include "lowering/helpers.h"
#include "lowering/num.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

constexpr double kEulerGamma = 0.57721566490153286061;

using Step = std::function<std::vector<Num>(const Num& k, const std::vector<Num>& state)>;

// Runs `step` for k = 1 .. count (a 0-d i64) on `state` (values of one shape); returns the state.
std::vector<Num> iterate(const Num& like, const Value& count, std::vector<Num> state,
                         const Step& step) {
  FunctionBuilder& b = *like.b;
  std::vector<Value> init = {int_full(b, ElementType::kS64, {}, 1), count};
  for (const Num& s : state) init.push_back(s.v);
  ElementType t = like.v.shape.type;
  std::vector<Value> out = while_loop(
      b, init,
      [](FunctionBuilder& r, const std::vector<Value>& s) {
        return std::vector<Value>{compare(r, s[0], s[1], "LE")};
      },
      [&step, t](FunctionBuilder& r, const std::vector<Value>& s) {
        std::vector<Num> now;
        for (size_t i = 2; i < s.size(); ++i) now.push_back({&r, s[i]});
        Num k{&r, broadcast_in_dim(r, convert(r, s[0], t), s[2].shape.dims, {})};
        std::vector<Value> next = {
            binary(r, "stablehlo.add", s[0], int_full(r, ElementType::kS64, {}, 1)), s[1]};
        for (const Num& v : step(k, now)) next.push_back(v.v);
        return next;
      });
  std::vector<Num> result;
  for (size_t i = 2; i < out.size(); ++i) result.push_back({like.b, out[i]});
  return result;
}

std::vector<Num> iterate(const Num& like, int64_t count, std::vector<Num> state,
                         const Step& step) {
  return iterate(like, int_full(*like.b, ElementType::kS64, {}, count), std::move(state), step);
}

// The largest element of x, 0-d (the trip count of a loop over every element).
Value largest(const Num& x) {
  Dims all(x.v.shape.rank());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
  return reduce_extreme(*x.b, x.v, all, true);
}

// Σ_{k>=0} t_k with t_0 = `first` and t_k = t_{k-1} * ratio(k); `terms` terms after the first.
Num series(const Num& first, int64_t terms, const std::function<Num(const Num& k)>& ratio) {
  return iterate(first, terms, {first, first}, [&](const Num& k, const std::vector<Num>& s) {
    Num t = s[0] * ratio(k);
    return std::vector<Num>{t, s[1] + t};
  })[1];
}

constexpr int64_t kSeriesTerms = 60;
constexpr int64_t kAsymptoticTerms = 18;

// J_nu (sign -1) or I_nu (sign +1) of x by its power series, nu = 0 or 1.
Num bessel_series(const Num& x, int nu, double sign) {
  Num q = sign * x * x / 4.0;
  Num first = nu == 0 ? x.k(1) : x / 2.0;
  return series(first, kSeriesTerms, [&](const Num& k) { return q / (k * (k + double(nu))); });
}

// Σ (ψ(k+1) + ψ(k+nu+1)) (sign x²/4)^k / (k! (k+nu)!): the series in Y_nu and K_nu.
Num psi_series(const Num& x, int nu, double sign) {
  Num q = sign * x * x / 4.0;
  Num t = x.k(1), psi_a = x.k(-kEulerGamma), psi_b = x.k(nu == 0 ? -kEulerGamma : 1 - kEulerGamma);
  std::vector<Num> s = iterate(x, kSeriesTerms, {t, psi_a, psi_b, psi_a + psi_b},
                               [&](const Num& k, const std::vector<Num>& s) {
    Num t = s[0] * q / (k * (k + double(nu)));
    Num a = s[1] + 1.0 / k, b = s[2] + 1.0 / (k + double(nu));
    return std::vector<Num>{t, a, b, s[3] + (a + b) * t};
  });
  return s[3];
}

// Hankel's asymptotic sums for large x: Σ c^k a_k(nu) / x^k with a_k the products
// (4nu² - 1)(4nu² - 9)...(4nu² - (2k-1)²) / (k! 8^k); c = -1 for I, +1 for K. For J and Y the
// even and odd terms (P and Q) alternate: returns {P, Q}.
Num hankel_sum(const Num& x, int nu, double c) {
  double mu = 4.0 * nu * nu;
  return series(x.k(1), kAsymptoticTerms, [&](const Num& k) {
    Num odd = 2.0 * k - 1.0;
    return c * (mu - odd * odd) / (8.0 * k * x);
  });
}

// For terms c_0 = 1, c_j = c_{j-1} * ratio(j): P = c_0 - c_2 + c_4 - ... and
// Q = c_1 - c_3 + c_5 - ..., the two halves of Hankel's and Airy's oscillating expansions.
std::pair<Num, Num> alternating_pair(const Num& like, const std::function<Num(const Num&)>& ratio) {
  // Step m adds c_{2m-1} to Q and c_{2m} to P, with signs (-1)^(m-1) and (-1)^m.
  std::vector<Num> s = iterate(like, kAsymptoticTerms, {like.k(1), like.k(1), like.k(0), like.k(1)},
                               [&](const Num& m, const std::vector<Num>& s) {
    Num c_odd = s[0] * ratio(2.0 * m - 1.0);
    Num c_even = c_odd * ratio(2.0 * m);
    return std::vector<Num>{c_even, s[1] - s[3] * c_even, s[2] + s[3] * c_odd, -s[3]};
  });
  return {s[1], s[2]};
}

std::pair<Num, Num> hankel_pq(const Num& x, int nu) {
  double mu = 4.0 * nu * nu;
  return alternating_pair(x, [&](const Num& j) {
    Num odd = 2.0 * j - 1.0;
    return (mu - odd * odd) / (8.0 * j * x);
  });
}

constexpr double kLargeJ = 20, kLargeI = 30, kLargeK = 9;

// J_nu and Y_nu (nu = 0, 1): series below kLargeJ, Hankel's expansion above.
Num bessel_j(const Num& x, int nu) {
  Num ax = abs(x);
  Num big = where(cmp(ax, "LT", kLargeJ), kLargeJ, ax);
  auto [p, q] = hankel_pq(big, nu);
  Num chi = big - (nu / 2.0 + 0.25) * M_PI;
  Num asym = sqrt(2.0 / (M_PI * big)) * (p * cos(chi) - q * sin(chi));
  if (nu == 1) asym = where(cmp(x, "LT", 0.0), -asym, asym);
  return where(cmp(ax, "LT", kLargeJ), bessel_series(x, nu, -1), asym);
}

Num bessel_y(const Num& x, int nu) {
  Num small = where(cmp(x, "LT", kLargeJ), x, 1.0);
  Num series_value = 2.0 / M_PI * log(small / 2.0) * bessel_series(small, nu, -1) -
                     1.0 / M_PI * (nu == 0 ? small.k(1) : small / 2.0) * psi_series(small, nu, -1);
  if (nu == 1) series_value = series_value - 2.0 / (M_PI * small);
  Num big = where(cmp(x, "LT", kLargeJ), kLargeJ, x);
  auto [p, q] = hankel_pq(big, nu);
  Num chi = big - (nu / 2.0 + 0.25) * M_PI;
  Num asym = sqrt(2.0 / (M_PI * big)) * (p * sin(chi) + q * cos(chi));
  Num y = where(cmp(x, "LT", kLargeJ), series_value, asym);
  y = where(cmp(x, "EQ", 0.0), -INFINITY, y);
  return where(cmp(x, "LT", 0.0), NAN, y);
}

// I_nu(x) scaled by e^-|x| when `scaled`.
Num bessel_i(const Num& x, int nu, bool scaled) {
  Num ax = abs(x);
  Value small = cmp(ax, "LE", kLargeI);
  Num s = where(small, x, 1.0);
  Num series_value = bessel_series(s, nu, 1);
  if (scaled) series_value = series_value * exp(-abs(s));
  Num big = where(small, kLargeI, ax);
  Num asym = hankel_sum(big, nu, -1) / sqrt(2.0 * M_PI * big);
  if (!scaled) asym = asym * exp(big);
  if (nu == 1) asym = where(cmp(x, "LT", 0.0), -asym, asym);
  return where(small, series_value, asym);
}

// K_nu(x) scaled by e^x when `scaled`.
Num bessel_k(const Num& x, int nu, bool scaled) {
  Value small = cmp(x, "LE", kLargeK);
  Num s = where(small, x, 1.0);
  double sign = nu == 0 ? -1 : 1;
  Num series_value = sign * log(s / 2.0) * bessel_series(s, nu, 1) -
                     sign * 0.5 * (nu == 0 ? s.k(1) : s / 2.0) * psi_series(s, nu, 1);
  if (nu == 1) series_value = series_value + 1.0 / s;
  if (scaled) series_value = series_value * exp(s);
  Num big = where(small, kLargeK, x);
  Num asym = hankel_sum(big, nu, 1) * sqrt(M_PI / (2.0 * big));
  if (!scaled) asym = asym * exp(-big);
  Num k = where(small, series_value, asym);
  k = where(cmp(x, "EQ", 0.0), INFINITY, k);
  return where(cmp(x, "LT", 0.0), NAN, k);
}

// erfcx(x) = e^(x²) erfc(x): directly below 25, by its asymptotic series above (erfc underflows).
Num erfcx(const Num& x) {
  Value small = cmp(x, "LT", 25.0);
  Num s = where(small, x, 0.0);
  Num direct = exp(s * s) * s.op("chlo.erfc");
  Num big = where(small, 25.0, x);
  Num z = 0.5 / (big * big);
  Num asym = series(big.k(1), 8, [&](const Num& k) { return -(2.0 * k - 1.0) * z; }) /
             (big * std::sqrt(M_PI));
  return where(small, direct, asym);
}

// log Φ(x): log(erfcx(-x/√2) / 2) - x²/2 below -1, where Φ underflows; else
// log1p(-erfc(x/√2) / 2).
Num log_ndtr(const Num& x) {
  Num t = x * M_SQRT1_2;
  Num low = log(erfcx(-t) / 2.0) - t * t;
  Num high = (-(t.op("chlo.erfc")) / 2.0).op("stablehlo.log_plus_one");
  return where(cmp(x, "LT", -1.0), low, high);
}

// ndtri(p) = sqrt(2) erfinv(2p - 1), but in the lower tail, where 2p - 1 rounds to -1 (ndtri(1e-30)
// was -inf), Newton's method on log Φ(x) = log p, from Φ(x) ~ φ(x) / |x|: x² ~ L - log L - log 2π
// for L = -2 log p.
Num ndtri(const Num& p) {
  Num direct = M_SQRT2 * (2.0 * p - 1.0).op("chlo.erf_inv");
  const double edge = 1e-3, log_root_2pi = 0.5 * std::log(2 * M_PI);
  Value tail = cmp(p, "LT", edge);
  Num log_p = log(where(tail, p, edge));  // finite where the tail is not taken
  Num l = -2.0 * log_p;
  Num x = -sqrt(l - log(l) - 2 * log_root_2pi);
  for (int i = 0; i < 4; ++i) {
    Num log_phi = log_ndtr(x);
    x = x - (log_phi - log_p) / exp(-0.5 * x * x - log_root_2pi - log_phi);
  }
  return where(cmp(p, "EQ", 0.0), -INFINITY, where(tail, x, direct));
}

// -x log x for x > 0, 0 at 0, -inf below 0, NaN for NaN.
Num entr(const Num& x) {
  Num r = where(cmp(x, "GT", 0.0), -x * log(where(cmp(x, "GT", 0.0), x, 1.0)), 0.0);
  r = where(cmp(x, "LT", 0.0), -INFINITY, r);
  return where(cmp(x, "NE", x), x, r);
}

// Ai(x): Maclaurin series f, g for -8 <= x <= 6 (Ai = Ai(0) f + Ai'(0) g), asymptotic
// expansions in zeta = 2/3 |x|^1.5 outside.
Num airy_ai(const Num& x) {
  constexpr double kAi0 = 0.355028053887817239, kAiPrime0 = -0.258819403792806798;
  Value inner = both(x, cmp(x, "GE", -8.0), cmp(x, "LE", 6.0));
  Num s = where(inner, x, 0.0);
  Num cube = s * s * s;
  Num f = series(s.k(1), kSeriesTerms,
                 [&](const Num& k) { return cube / ((3.0 * k) * (3.0 * k - 1.0)); });
  Num g = series(s, kSeriesTerms,
                 [&](const Num& k) { return cube / ((3.0 * k + 1.0) * (3.0 * k)); });
  Num near = kAi0 * f + kAiPrime0 * g;
  Num z = where(inner, 8.0, abs(x));
  Num zeta = 2.0 / 3.0 * z * sqrt(z);
  auto u_ratio = [&](const Num& k) {
    return (6.0 * k - 5.0) * (6.0 * k - 3.0) * (6.0 * k - 1.0) /
           ((2.0 * k - 1.0) * 216.0 * k * zeta);
  };
  Num quarter = sqrt(sqrt(z));
  Num right = exp(-zeta) / (2.0 * std::sqrt(M_PI) * quarter) *
              series(z.k(1), kAsymptoticTerms, [&](const Num& k) { return -u_ratio(k); });
  auto [p, q] = alternating_pair(z, u_ratio);
  Num phase = zeta + M_PI / 4.0;
  Num left = (sin(phase) * p - cos(phase) * q) / (std::sqrt(M_PI) * quarter);
  Num far = where(cmp(x, "GT", 0.0), right, left);
  far = where(cmp(x, "EQ", INFINITY), 0.0, far);
  far = where(cmp(x, "EQ", -INFINITY), NAN, far);
  return where(inner, near, far);
}

// log(x^a e^-x / Γ(a + 1)) for a >= 20 without the cancellation of a log x - x - lgamma(a + 1)
// (some a log a, so P(1e12, 1e12) was off by 2e-3): with d = x / a - 1 and Stirling's series,
// -a (d - log(1 + d)) - log(2πa) / 2 - (1/(12a) - 1/(360a³) + 1/(1260a⁵) - 1/(1680a⁷) + ...).
Num log_gamma_front(const Num& a, const Num& x) {
  Num d = (x - a) / a;
  // d - log1p(d), by its series d²/2 - d³/3 + ... where it cancels.
  Value near = cmp(abs(d), "LT", 1e-2);
  Num small = where(near, d, 0.0);
  Num power = small * small, tail = small.k(0);
  for (int k = 2; k <= 8; ++k, power = power * small) {
    tail = tail + (k % 2 == 0 ? 1.0 : -1.0) / k * power;
  }
  Num excess = where(near, tail, d - log1p(d));
  Num inverse = 1.0 / a, inverse2 = inverse * inverse;
  Num stirling = inverse * (1.0 / 12 - inverse2 * (1.0 / 360 - inverse2 * (1.0 / 1260 -
                            inverse2 * (1.0 / 1680 - inverse2 / 1188))));
  return -a * excess - 0.5 * log(2.0 * M_PI * a) - stirling;
}

// Terms of incomplete_gamma's series and continued fraction: where x is near a, both converge
// after some 9 sqrt(a) terms, so 300 (enough to a = 1000) gave P(1e4, 1e4) = 0.49994 for
// 0.50133; the count is taken from the largest finite a (a = 1e12 takes 1e7 iterations).
Value gamma_terms(const Num& a) {
  Num most{a.b, largest(where(cmp(abs(a), "LT", INFINITY), a, 0.0))};
  return convert(*a.b, (300.0 + 10.0 * sqrt(most)).op("stablehlo.ceil").v, ElementType::kS64);
}

// The regularized incomplete gamma functions P(a, x) (`upper` false) and Q(a, x): P's series
// for x < a + 1, else Q's continued fraction (modified Lentz), the other as 1 minus it.
Num incomplete_gamma(const Num& a, const Num& x, bool upper) {
  Value use_series = cmp(x, "LT", a + 1.0);
  Num sa = where(use_series, a, 1.0), sx = where(use_series, x, 0.5);
  Num log_front = where(cmp(sa, "GE", 20.0), log_gamma_front(sa, sx),
                        sa * log(sx) - sx - (sa + 1.0).op("chlo.lgamma"));
  Value terms = gamma_terms(a);
  Num sum = iterate(sx, terms, {sx.k(1), sx.k(1)}, [&](const Num& k, const std::vector<Num>& s) {
    Num t = s[0] * sx / (sa + k);
    return std::vector<Num>{t, s[1] + t};
  })[1];
  Num p_series = exp(log_front) * sum;
  Num ca = where(use_series, 1.0, a), cx = where(use_series, 2.0, x);
  constexpr double kTiny = 1e-300;
  auto floor_tiny = [&](const Num& v) { return where(cmp(abs(v), "LT", kTiny), kTiny, v); };
  Num b0 = cx + 1.0 - ca;
  Num d0 = 1.0 / floor_tiny(b0);
  std::vector<Num> s = iterate(cx, terms, {b0, cx.k(1.0 / kTiny), d0, d0},
                               [&](const Num& i, const std::vector<Num>& s) {
    Num an = -i * (i - ca), bn = s[0] + 2.0;
    Num d = 1.0 / floor_tiny(an * s[2] + bn);
    Num c = floor_tiny(bn + an / s[1]);
    return std::vector<Num>{bn, c, d, s[3] * d * c};
  });
  Num cf_front = where(cmp(ca, "GE", 20.0), log_gamma_front(ca, cx) + log(ca),
                       ca * log(cx) - cx - ca.op("chlo.lgamma"));
  Num q_fraction = exp(cf_front) * s[3];
  Num r = upper ? where(use_series, 1.0 - p_series, q_fraction)
                : where(use_series, p_series, 1.0 - q_fraction);
  // PyTorch's edge values: x = 0 or a = inf, x = inf, a = 0; NaN outside the domain.
  double at_zero = upper ? 1 : 0, at_inf = upper ? 0 : 1;
  r = where(cmp(x, "EQ", INFINITY), at_inf, r);
  r = where(both(x, cmp(a, "EQ", INFINITY), cmp(x, "NE", INFINITY)), at_zero, r);
  r = where(cmp(x, "EQ", 0.0), at_zero, r);
  r = where(cmp(a, "EQ", 0.0), where(cmp(x, "GT", 0.0), at_inf, x.k(NAN)), r);
  Value outside = either(x, either(x, cmp(a, "LT", 0.0), cmp(x, "LT", 0.0)),
                         both(x, cmp(a, "EQ", INFINITY), cmp(x, "EQ", INFINITY)));
  return where(outside, NAN, r);
}

// ψ^(n)(x). XLA's polygamma strays below 0, so x < 0 is first shifted up by m = ceil(-x):
// ψ^(n)(x) = ψ^(n)(x + m) - (-1)^n n! Σ_{k<m} (x + k)^-(n+1).
Num polygamma(int64_t n, const Num& x) {
  FunctionBuilder& b = *x.b;
  Num m = where(cmp(x, "LT", 0.0), (-x).op("stablehlo.ceil"), 0.0);
  Dims dims(x.v.shape.rank());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int64_t>(d);
  Value finite_m = where(cmp(m, "EQ", INFINITY), 0.0, m).v;
  Value count = reduce_extreme(b, convert(b, finite_m, ElementType::kS64), dims, true);
  double factor = (n % 2 == 0 ? -1.0 : 1.0) * std::tgamma(static_cast<double>(n) + 1);
  Num sum = iterate(x, count, {x.k(0), x, m}, [&](const Num& k, const std::vector<Num>& s) {
    Num base = s[1] + (k - 1.0), power = base;
    for (int64_t j = 0; j < n; ++j) power = power * base;
    Num add = 1.0 / power;
    return std::vector<Num>{where(cmp(s[2], "GE", k), s[0] + add, s[0]), s[1], s[2]};
  })[0];
  Num shifted = x + m;
  Num order = x.k(static_cast<double>(n));
  Num value = Num{&b, b.op("chlo.polygamma", {order.v, shifted.v}, x.v.shape)} + factor * sum;
  // The CPU's values at the poles (0, the negative integers, -inf) and at +inf: ψ' is +inf at a
  // pole (NaN at -inf) and 0 at +inf; above it, -(-1)^n n! ζ(n + 1, x) takes ζ's +inf at a
  // pole, and NaN at +inf.
  Value pole = both(x, cmp(x, "LE", 0.0), cmp(x.op("stablehlo.floor"), "EQ", x));
  if (n == 1) {
    value = where(both(x, pole, cmp(x, "NE", -INFINITY)), INFINITY, value);
    return where(cmp(x, "EQ", INFINITY), 0.0, value);
  }
  return where(pole, factor * INFINITY, value);
}

// A unary special function computed in `wide` precision: f(x) rounded to the output type.
LoweringRule unary_special(std::function<Num(const Num&)> f, bool widen = true) {
  return [f, widen](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = widen ? wide(t) : opmath(t);
    Num x{&b, promote(b, v[0], c, out_shape(a))};
    return Values{convert(b, f(x).v, t)};
  };
}

// A binary one of (x, y) promoted to one type.
LoweringRule binary_special(std::function<Num(const Num&, const Num&)> f, bool widen = true) {
  return [f, widen](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = widen ? wide(t) : opmath(t);
    Num x{&b, promote(b, v[0], c, out_shape(a))}, y{&b, promote(b, v[1], c, out_shape(a))};
    return Values{convert(b, f(x, y).v, t)};
  };
}

// --- Orthogonal polynomials of degree n (a tensor, truncated to an integer as on the CPU). ---

// P_n for P_0 = 1, P_1 = p1 and P_{k+1} = step(k, P_k, P_{k-1}), iterated to the largest n.
Num recurrence(const Num& x, const Num& n, const Num& p1,
               const std::function<Num(const Num& k, const Num& q, const Num& p)>& step) {
  FunctionBuilder& b = *x.b;
  Value count = largest(Num{&b, convert(b, n.v, ElementType::kS64)});
  count = binary(b, "stablehlo.subtract", count, int_full(b, ElementType::kS64, {}, 1));
  std::vector<Num> s = iterate(x, count, {x.k(1), p1, n}, [&](const Num& k,
                                                           const std::vector<Num>& s) {
    Value more = cmp(s[2], "GT", k);
    Num r = step(k, s[1], s[0]);
    return std::vector<Num>{where(more, s[1], s[0]), where(more, r, s[1]), s[2]};
  });
  return where(cmp(n, "EQ", 0.0), 1.0, s[1]);
}

Num chebyshev_step(const Num& x, const Num&, const Num& q, const Num& p) { return (x + x) * q - p; }

// The Hurwitz zeta function with PyTorch's (Cephes') domain: x = 1 and a non-positive integer q
// give +inf, x < 1 gives NaN, where chlo.zeta gives NaN for the first and +inf for the second;
// at x = +inf, where chlo.zeta gives NaN for q <= 1, the CPU gives the largest term q^-x: +inf
// for q < 1 (or a term |q + k|^-x with |q + k| < 1), 1 for q = 1 (and NaN above, as chlo.zeta).
// A negative q (not an integer) takes the series' first n = ceil(-q) terms (q + k)^-x one by one,
// as the CPU does, and chlo.zeta from q + n in (0, 1) (chlo.zeta itself gave zeta(2, -10.3) =
// 1e18 for 14.99); the CPU gives NaN there for an x that is not an integer.
Num zeta(const Num& x, const Num& q) {
  FunctionBuilder& b = *x.b;
  Value negative = cmp(q, "LT", 0.0);
  // Only where the series is summed: a negative integer q is a pole (-1e30 in float32 is one).
  Value summed = both(q, both(q, negative, cmp(floor(q), "NE", q)), cmp(floor(x), "EQ", x));
  Num n = where(summed, -q, 0.0).op("stablehlo.ceil");
  Value count = convert(b, largest(n), ElementType::kS64);
  // Terms k = 1..n: (q + k - 1)^-x.
  Num head = iterate(x, count, {x.k(0)}, [&](const Num& k, const std::vector<Num>& s) {
    Num term = bin("stablehlo.power", k + q.in(*k.b) - 1.0, -x.in(*k.b));
    return std::vector<Num>{s[0] + where(cmp(k, "LE", n.in(*k.b)), term, 0.0)};
  })[0];
  Num r = head + Num{&b, b.op("chlo.zeta", {x.v, (q + n).v}, x.v.shape)};
  r = where(both(q, negative, cmp(floor(x), "NE", x)), NAN, r);
  Value pole = both(q, cmp(q, "LE", 0.0), cmp(q.op("stablehlo.floor"), "EQ", q));
  Value at_inf = cmp(x, "EQ", INFINITY);
  r = where(both(q, at_inf, cmp(q, "EQ", 1.0)), 1.0, r);
  r = where(either(q, pole, both(q, at_inf, cmp(q, "LT", 1.0))), INFINITY, r);
  r = where(cmp(x, "LT", 1.0), NAN, r);
  return where(cmp(x, "EQ", 1.0), INFINITY, r);
}

Value even(const Num& n) {
  Num half = n / 2.0;
  return cmp(half.op("stablehlo.floor"), "EQ", half);
}

// kind T, U, V or W of the Chebyshev polynomials, with PyTorch's closed forms for |x| < 1 and
// large n and its values at |x| = 1.
Num chebyshev(const Num& x, const Num& n, char kind) {
  auto step = [&](const Num& k, const Num& q, const Num& p) { return chebyshev_step(x, k, q, p); };
  Num p1 = kind == 'T' ? x : kind == 'U' ? x + x : kind == 'V' ? x + x - 1.0 : x + x + 1.0;
  Num r = recurrence(x, n, p1, step);
  Num inside = where(cmp(abs(x), "LT", 1.0), x, 0.0);
  Num theta = inside.op("chlo.acos");
  Num two_n1 = n + n + 1.0;
  Num closed, at_one, at_minus_one;
  if (kind == 'T') {
    closed = cos(n * theta);
    at_one = x.k(1);
    at_minus_one = where(even(n), 1.0, x.k(-1));
  } else if (kind == 'U') {
    Num s = sin(theta);
    closed = where(cmp(s, "NE", 0.0), sin((n + 1.0) * theta) / s,
                   (n + 1.0) * cos((n + 1.0) * theta) / inside);
    at_one = n + 1.0;
    at_minus_one = where(even(n), n + 1.0, -(n + 1.0));
  } else if (kind == 'V') {
    closed = where(cmp(sin(theta / 2.0), "NE", 1.0), cos((n + 0.5) * theta) / cos(theta / 2.0),
                   where(even(n), two_n1, -two_n1));
    at_one = x.k(1);
    at_minus_one = where(even(n), two_n1, -two_n1);
  } else {
    closed = where(cmp(cos(theta / 2.0), "NE", 1.0), sin((n + 0.5) * theta) / sin(theta / 2.0),
                   where(cmp(x, "GT", 0.0), two_n1, where(even(n), 1.0, x.k(-1))));
    at_one = two_n1;
    at_minus_one = where(even(n), 1.0, x.k(-1));
  }
  double large = kind == 'T' ? 6 : 8;
  r = where(both(x, cmp(abs(x), "LT", 1.0), cmp(n, "GT", large)), closed, r);
  r = where(cmp(x, "EQ", 1.0), at_one, where(cmp(x, "EQ", -1.0), at_minus_one, r));
  return where(cmp(n, "LT", 0.0), 0.0, r);
}

// n as PyTorch reads it: the integer part.
Num degree(const Num& n) {
  FunctionBuilder& b = *n.b;
  return {n.b, convert(b, convert(b, n.v, ElementType::kS64), n.v.shape.type)};
}

LoweringRule polynomial(std::function<Num(const Num& x, const Num& n)> f) {
  return binary_special([f](const Num& x, const Num& n) { return f(x, degree(n)); }, false);
}

LoweringRule chebyshev_rule(char kind, bool shifted) {
  return polynomial([kind, shifted](const Num& x, const Num& n) {
    return chebyshev(shifted ? x + x - 1.0 : x, n, kind);
  });
}

Num zero_below(const Num& n, const Num& r) { return where(cmp(n, "LT", 0.0), 0.0, r); }

Num hermite_h(const Num& x, const Num& n) {
  return zero_below(n, recurrence(x, n, x + x, [&](const Num& k, const Num& q, const Num& p) {
    return (x + x) * q - (k + k) * p;
  }));
}

Num hermite_he(const Num& x, const Num& n) {
  return zero_below(n, recurrence(x, n, x, [&](const Num& k, const Num& q, const Num& p) {
    return x * q - k * p;
  }));
}

Num laguerre_l(const Num& x, const Num& n) {
  Num r = recurrence(x, n, 1.0 - x, [&](const Num& k, const Num& q, const Num& p) {
    return (((k + k) + (1.0 - x)) * q - k * p) / (k + 1.0);
  });
  return zero_below(n, where(cmp(x, "EQ", 0.0), 1.0, r));
}

Num legendre_p(const Num& x, const Num& n) {
  Num r = recurrence(x, n, x, [&](const Num& k, const Num& q, const Num& p) {
    return ((k + k + 1.0) * x * q - k * p) / (k + 1.0);
  });
  r = where(cmp(x, "EQ", 1.0), 1.0, where(cmp(x, "EQ", -1.0), where(even(n), 1.0, x.k(-1)), r));
  return zero_below(n, r);
}

}  // namespace

void register_special_rules(Registry& r) {
  r.add("i0", unary_special([](const Num& x) { return bessel_i(x, 0, false); }), all("i0"));
  r.add("special_i0e", unary_special([](const Num& x) { return bessel_i(x, 0, true); }),
        all("special_i0e"));
  r.add("special_i1", unary_special([](const Num& x) { return bessel_i(x, 1, false); }),
        all("special_i1"));
  r.add("special_i1e", unary_special([](const Num& x) { return bessel_i(x, 1, true); }),
        all("special_i1e"));
  r.add("special_modified_bessel_i0",
        unary_special([](const Num& x) { return bessel_i(x, 0, false); }),
        all("special_modified_bessel_i0"));
  r.add("special_modified_bessel_i1",
        unary_special([](const Num& x) { return bessel_i(x, 1, false); }),
        all("special_modified_bessel_i1"));
  const std::pair<const char*, std::pair<int, bool>> k_kinds[] = {
      {"special_modified_bessel_k0", {0, false}},
      {"special_modified_bessel_k1", {1, false}},
      {"special_scaled_modified_bessel_k0", {0, true}},
      {"special_scaled_modified_bessel_k1", {1, true}}};
  for (const auto& [name, kind] : k_kinds) {
    auto [nu, scaled] = kind;
    r.add(name, unary_special([nu, scaled](const Num& x) { return bessel_k(x, nu, scaled); }),
          all(name));
  }
  r.add("special_bessel_j0", unary_special([](const Num& x) { return bessel_j(x, 0); }),
        all("special_bessel_j0"));
  r.add("special_bessel_j1", unary_special([](const Num& x) { return bessel_j(x, 1); }),
        all("special_bessel_j1"));
  r.add("special_bessel_y0", unary_special([](const Num& x) { return bessel_y(x, 0); }),
        all("special_bessel_y0"));
  r.add("special_bessel_y1", unary_special([](const Num& x) { return bessel_y(x, 1); }),
        all("special_bessel_y1"));
  r.add("special_spherical_bessel_j0", unary_special([](const Num& x) {
          Num safe = where(cmp(x, "EQ", 0.0), 1.0, x);
          Num j = where(cmp(x, "EQ", 0.0), 1.0, sin(safe) / safe);
          return where(cmp(abs(x), "EQ", INFINITY), 0.0, j);
        }), all("special_spherical_bessel_j0"));
  r.add("special_airy_ai", unary_special(airy_ai), all("special_airy_ai"));
  r.elementwise("igamma", binary_special([](const Num& a, const Num& x) {
                  return incomplete_gamma(a, x, false);
                }), {"igamma", "igamma.out", "igamma_"});
  r.elementwise("igammac", binary_special([](const Num& a, const Num& x) {
                  return incomplete_gamma(a, x, true);
                }), {"igammac", "igammac.out", "igammac_"});
  r.add("special_erfcx", unary_special(erfcx), all("special_erfcx"));
  r.add("special_log_ndtr", unary_special(log_ndtr), all("special_log_ndtr"));
  r.add("special_ndtri", unary_special(ndtri), all("special_ndtri"));
  r.add("special_entr", unary_special(entr, false), all("special_entr"));
  // polygamma(n, x); n = 0 is digamma's rule (its CPU kernel is digamma's).
  r.add("polygamma", [](FunctionBuilder& b, const Values& v, const Attrs& a) {
          if (a.i("n") == 0) return rule("digamma")(b, v, a);
          ElementType t = out_type(a);
          Num x{&b, promote(b, v[0], wide(t), out_shape(a))};
          return Values{convert(b, polygamma(a.i("n"), x).v, t)};
        }, {"polygamma", "polygamma.out", "polygamma_"});
  r.elementwise("special_zeta", binary_special(zeta), all("special_zeta"));

  const std::pair<const char*, char> chebyshev_kinds[] = {{"t", 'T'}, {"u", 'U'}, {"v", 'V'},
                                                          {"w", 'W'}};
  for (const auto& [suffix, kind] : chebyshev_kinds) {
    std::string plain = std::string("special_chebyshev_polynomial_") + suffix;
    std::string shifted = std::string("special_shifted_chebyshev_polynomial_") + suffix;
    r.elementwise(plain, chebyshev_rule(kind, false), all(plain));
    r.elementwise(shifted, chebyshev_rule(kind, true), all(shifted));
  }
  r.elementwise("special_hermite_polynomial_h", polynomial(hermite_h),
                all("special_hermite_polynomial_h"));
  r.elementwise("special_hermite_polynomial_he", polynomial(hermite_he),
                all("special_hermite_polynomial_he"));
  r.elementwise("special_laguerre_polynomial_l", polynomial(laguerre_l),
                all("special_laguerre_polynomial_l"));
  r.elementwise("special_legendre_polynomial_p", polynomial(legendre_p),
                all("special_legendre_polynomial_p"));
}

}  // namespace torchtpu::lowering
