// LDL^T of symmetric matrices with Bunch-Kaufman pivoting, and solves with it: LAPACK's unblocked
// sytf2 (lower) and sytrs, step by step, so the factors and pivots are LAPACK's (the CPU calls
// sytrf, which for n <= its block size, 64 at least, is sytf2 itself; above it the blocked code
// makes the same pivot choices, rounded another way). Each step takes a 1x1 or a 2x2 pivot, so
// each matrix of a batch keeps its own column index: the loop runs until every matrix is done.
// The upper triangle is never read; the factor comes out with zeros there, as PyTorch's.
// Complex matrices: symmetric ones as zsytf2 / zsytrs (the same steps in complex arithmetic,
// magnitudes |re| + |im|), Hermitian ones (hermitian=True) as zhetf2 / zhetrs: LDL^H, a real
// diagonal (its imaginary parts ignored), conjugates where the transpose is an adjoint.
#include <cmath>

#include "lowering/matrix.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

constexpr ElementType kS64 = ElementType::kS64;

Value add(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.add", x, y);
}
Value sub(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.subtract", x, y);
}
Value mul(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.multiply", x, y);
}
Value div(FunctionBuilder& b, const Value& x, const Value& y) { return divide(b, x, y); }
Value plus(FunctionBuilder& b, const Value& x, int64_t c) {
  return add(b, x, full(b, x.shape.type, x.shape.dims, static_cast<double>(c)));
}

// Per-matrix indices: `index` (s64 of the batch dims) against the iota of `dims` along `axis`.
Value at_index(FunctionBuilder& b, const Dims& dims, int64_t axis, const Value& index,
               const std::string& direction = "EQ") {
  return compare(b, iota(b, kS64, dims, axis), leading_to(b, index, dims), direction);
}

// The elements of `x` where `mask` holds, summed over `axis` (one element: exact).
Value masked_sum(FunctionBuilder& b, const Value& x, const Value& mask, int64_t axis) {
  ElementType t = x.shape.type;
  return reduce(b, select(b, mask, x, full(b, t, x.shape.dims, 0)), {axis}, constant(b, t, 0),
                "stablehlo.add");
}

// Row `i` ([..., n] over the columns) and column `j` ([..., n] over the rows) of each matrix.
Value row(FunctionBuilder& b, const Value& a, const Value& i) {
  int64_t r = a.shape.rank();
  return masked_sum(b, a, at_index(b, a.shape.dims, r - 2, i), r - 2);
}
Value column(FunctionBuilder& b, const Value& a, const Value& j) {
  int64_t r = a.shape.rank();
  return masked_sum(b, a, at_index(b, a.shape.dims, r - 1, j), r - 1);
}
// Element `i` of each vector ([..., n]).
Value entry(FunctionBuilder& b, const Value& v, const Value& i) {
  int64_t axis = v.shape.rank() - 1;
  return masked_sum(b, v, at_index(b, v.shape.dims, axis, i), axis);
}

// Rows `i` and `j` of each matrix of `x` ([..., n, c]) swapped.
Value swap_rows(FunctionBuilder& b, const Value& x, const Value& i, const Value& j) {
  int64_t r = x.shape.rank();
  const Dims& dims = x.shape.dims;
  Dims along = Dims(r - 2);
  for (int64_t d = 0; d < r - 2; ++d) along[d] = d;
  along.push_back(r - 1);
  Value ri = broadcast_in_dim(b, row(b, x, i), dims, along);
  Value rj = broadcast_in_dim(b, row(b, x, j), dims, along);
  Value on_i = at_index(b, dims, r - 2, i), on_j = at_index(b, dims, r - 2, j);
  return select(b, on_i, rj, select(b, on_j, ri, x));
}

Value swap_columns(FunctionBuilder& b, const Value& x, const Value& i, const Value& j) {
  return matrix_transpose(b, swap_rows(b, matrix_transpose(b, x), i, j));
}

// `v` ([..., n]) spread over the rows (`over_rows`: v_i at (i, j)) or the columns of `dims`.
Value spread(FunctionBuilder& b, const Value& v, const Dims& dims, bool over_rows) {
  int64_t r = dims.size();
  Dims at(r - 1);
  for (int64_t d = 0; d < r - 2; ++d) at[d] = d;
  at[r - 2] = over_rows ? r - 2 : r - 1;
  return broadcast_in_dim(b, v, dims, at);
}

// MAX(x, y) as the CPU's LAPACK computes it: x where x > y, else y (a NaN x gives y, a NaN y
// itself), which the pivot choices show where a column holds a NaN.
Value lapack_max(FunctionBuilder& b, const Value& x, const Value& y) {
  return select(b, compare(b, x, y, "GT"), x, y);
}

// Whether the factorization is zhetf2's: complex and Hermitian (a real one is both).
bool conjugating(const Value& x, bool hermitian) {
  return hermitian && hlo::is_complex(x.shape.type);
}

// A diagonal element's magnitude for pivoting: |re| of a Hermitian matrix's, abs1 otherwise.
Value diagonal_magnitude(FunctionBuilder& b, const Value& x, bool hermitian) {
  return conjugating(x, hermitian) ? unary(b, "stablehlo.abs", real_and_imag(b, x).first)
                                   : abs1(b, x);
}

// `x` conjugated for a Hermitian factorization, as it is otherwise.
Value conj_if(FunctionBuilder& b, const Value& x, bool hermitian) {
  return conjugating(x, hermitian) ? conjugate(b, x) : x;
}

// A Hermitian matrix's diagonal made real (zhetf2 keeps it so); others as they are.
Value real_diagonal(FunctionBuilder& b, const Value& a, bool hermitian) {
  if (!conjugating(a, hermitian)) return a;
  int64_t r = a.shape.rank();
  Value on = compare(b, iota(b, kS64, a.shape.dims, r - 2), iota(b, kS64, a.shape.dims, r - 1),
                     "EQ");
  Value re = convert(b, real_and_imag(b, a).first, a.shape.type);
  return select(b, on, re, a);
}

// A real value per matrix ([...]) as `like`'s complex type, broadcast to `dims`.
Value real_as(FunctionBuilder& b, const Value& x, const Value& like, const Dims& dims) {
  return leading_to(b, convert(b, x, like.shape.type), dims);
}

// One sytf2 (zhetf2) step at each matrix's own column k: loop values (k, a, pivots, info).
std::vector<Value> ldl_step(FunctionBuilder& b, const std::vector<Value>& s, bool hermitian) {
  const Value &k = s[0], &pivots = s[2], &info = s[3];
  Value a = s[1];
  const Dims& dims = a.shape.dims;
  int64_t r = a.shape.rank(), n = dims.back();
  Dims batch = batch_dims(a), vec = with(batch, {n});
  auto like = [&](const Value& x, double c) { return full(b, x.shape.type, x.shape.dims, c); };
  const double alpha = (1 + std::sqrt(17.0)) / 8;
  Value active = compare(b, k, full(b, kS64, batch, static_cast<double>(n)), "LT");
  Value ck = column(b, a, k);
  Value absakk = diagonal_magnitude(b, entry(b, ck, k), hermitian);
  auto [colmax, imax] = first_largest(b, ck, at_index(b, vec, r - 2, k, "GT"), true);
  // A zero column stops here (info). Where the diagonal element is NaN, the reference sytf2
  // stops too, but the CPU's LAPACK goes on choosing a pivot: as the CPU.
  Value zero = compare(b, lapack_max(b, absakk, colmax), like(absakk, 0), "EQ");
  // rowmax: the largest off-diagonal |element| of row and column imax.
  Value ci = column(b, a, imax), ri = row(b, a, imax);
  Value in_row = b_and(b, at_index(b, vec, r - 2, k, "GE"), at_index(b, vec, r - 2, imax, "LT"));
  Value rowmax = lapack_max(b, first_largest(b, ri, in_row, true).first,
                            first_largest(b, ci, at_index(b, vec, r - 2, imax, "GT"), true).first);
  Value scaled = mul(b, like(colmax, alpha), colmax);
  Value c1 = compare(b, absakk, scaled, "GE");
  Value c2 = compare(b, absakk, mul(b, scaled, div(b, colmax, rowmax)), "GE");
  Value c3 = compare(b, diagonal_magnitude(b, entry(b, ci, imax), hermitian),
                     mul(b, like(rowmax, alpha), rowmax), "GE");
  Value at_k = b_or(b, zero, b_or(b, c1, c2));
  Value kp = select(b, at_k, k, imax);
  Value two = b_and(b, compare(b, at_k, like(at_k, 0), "EQ"),
                    compare(b, c3, like(c3, 0), "EQ"));
  Value kk = select(b, two, plus(b, k, 1), k);
  // The interchange of kk and kp in the trailing block, as a symmetric permutation of it.
  Value rows = iota(b, kS64, dims, r - 2), cols = iota(b, kS64, dims, r - 1);
  Value lower = compare(b, rows, cols, "GE");
  Value symmetric = select(b, lower, a, conj_if(b, matrix_transpose(b, a), hermitian));
  Value swapped = swap_columns(b, swap_rows(b, symmetric, kk, kp), kk, kp);
  Value block = b_and(b, at_index(b, dims, r - 2, k, "GE"), at_index(b, dims, r - 1, k, "GE"));
  Value swap = b_and(b, active, compare(b, zero, like(zero, 0), "EQ"));
  a = select(b, b_and(b, leading_to(b, swap, dims), b_and(b, block, lower)), swapped, a);
  // The trailing update.
  ck = column(b, a, k);
  Value k1 = plus(b, k, 1);
  Value ck1 = column(b, a, k1);
  Value akk = entry(b, ck, k);
  // 1x1: A(i,j) += x_i * (-d11 conj(x_j)), then x *= d11 (sytf2's syr and scal; zhetf2's her
  // with d11 = 1 / re(akk)).
  bool herm = conjugating(a, hermitian);
  Value d11 = herm ? convert(b, div(b, like(absakk, 1), real_and_imag(b, akk).first),
                             akk.shape.type)
                   : div(b, like(akk, 1), akk);
  Value xi = spread(b, ck, dims, true), xj = spread(b, conj_if(b, ck, hermitian), dims, false);
  Value neg = leading_to(b, unary(b, "stablehlo.negate", d11), dims);
  Value one_update = add(b, a, mul(b, xi, mul(b, neg, xj)));
  Value one_column = mul(b, xi, leading_to(b, d11, dims));
  // 2x2: A(i,j) -= A(i,k) conj(wk_j) + A(i,k+1) conj(wkp1_j), then the columns k, k+1 become wk,
  // wkp1 (zhetf2 scales by |A(k+1,k)|, sytf2 divides by A(k+1,k)).
  Value e21 = entry(b, ck, k1), wk, wkp1;
  if (herm) {
    Value d = modulus(b, e21);
    Value e11 = div(b, real_and_imag(b, entry(b, ck1, k1)).first, d);
    Value e22 = div(b, real_and_imag(b, akk).first, d);
    Value tt = div(b, like(e11, 1), sub(b, mul(b, e11, e22), like(e11, 1)));
    Value d21 = leading_to(b, div(b, e21, convert(b, d, e21.shape.type)), vec);
    Value scale = real_as(b, div(b, tt, d), ck, vec);
    wk = mul(b, scale, sub(b, mul(b, real_as(b, e11, ck, vec), ck), mul(b, d21, ck1)));
    wkp1 = mul(b, scale, sub(b, mul(b, real_as(b, e22, ck, vec), ck1),
                             mul(b, conjugate(b, d21), ck)));
  } else {
    Value e11 = div(b, entry(b, ck1, k1), e21), e22 = div(b, akk, e21);
    Value tt = div(b, like(e11, 1), sub(b, mul(b, e11, e22), like(e11, 1)));
    Value v21 = leading_to(b, div(b, tt, e21), vec);
    Value v11 = leading_to(b, e11, vec), v22 = leading_to(b, e22, vec);
    wk = mul(b, v21, sub(b, mul(b, v11, ck), ck1));
    wkp1 = mul(b, v21, sub(b, mul(b, v22, ck1), ck));
  }
  Value xi1 = spread(b, ck1, dims, true);
  Value two_update =
      sub(b, sub(b, a, mul(b, xi, spread(b, conj_if(b, wk, hermitian), dims, false))),
          mul(b, xi1, spread(b, conj_if(b, wkp1, hermitian), dims, false)));
  Value proceed = leading_to(b, swap, dims);
  Value one = b_and(b, proceed, leading_to(b, compare(b, two, like(two, 0), "EQ"), dims));
  Value pair = b_and(b, proceed, leading_to(b, two, dims));
  Value below_k = at_index(b, dims, r - 2, k, "GT"), right_k = at_index(b, dims, r - 1, k, "GT");
  Value on_k = at_index(b, dims, r - 1, k), on_k1 = at_index(b, dims, r - 1, k1);
  Value below_k1 = at_index(b, dims, r - 2, k1, "GT");
  Value right_k1 = at_index(b, dims, r - 1, k1, "GT");
  Value updated = select(b, b_and(b, one, b_and(b, lower, b_and(b, below_k, right_k))), one_update,
                         a);
  updated = select(b, b_and(b, one, b_and(b, below_k, on_k)), one_column, updated);
  updated = select(b, b_and(b, pair, b_and(b, lower, b_and(b, below_k1, right_k1))), two_update,
                   updated);
  updated = select(b, b_and(b, pair, b_and(b, below_k1, on_k)), spread(b, wk, dims, true),
                   updated);
  updated = select(b, b_and(b, pair, b_and(b, below_k1, on_k1)), spread(b, wkp1, dims, true),
                   updated);
  // LAPACK's pivots (1-based; -kp for both columns of a 2x2 pivot) and info.
  Value kp1 = convert(b, plus(b, kp, 1), ElementType::kS32);
  Value code = select(b, two, unary(b, "stablehlo.negate", kp1), kp1);
  Value piv = select(b, b_and(b, leading_to(b, active, vec), at_index(b, vec, r - 2, k)),
                     leading_to(b, code, vec), pivots);
  piv = select(b, b_and(b, leading_to(b, b_and(b, active, two), vec), at_index(b, vec, r - 2, k1)),
               leading_to(b, code, vec), piv);
  Value first = b_and(b, b_and(b, active, zero),
                      compare(b, info, full(b, ElementType::kS32, batch, 0), "EQ"));
  Value next_info = select(b, first, convert(b, plus(b, k, 1), ElementType::kS32), info);
  Value next_k = select(b, active, select(b, two, plus(b, k, 2), plus(b, k, 1)), k);
  return {next_k, real_diagonal(b, updated, hermitian), piv, next_info};
}

// Whether any matrix's index still satisfies `direction` against `bound`.
Value any_left(FunctionBuilder& b, const Value& k, int64_t bound, const std::string& direction) {
  Value left = compare(b, k, full(b, kS64, k.shape.dims, static_cast<double>(bound)), direction);
  Dims all(k.shape.rank());
  for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
  return reduce(b, left, all, constant(b, ElementType::kPred, 0), "stablehlo.or");
}

// linalg_ldl_factor_ex(A, hermitian, check_errors) -> (LD, pivots, info).
Values ldl_factor(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value& x = v[0];
  bool hermitian = a.i("hermitian");
  Dims batch = batch_dims(x);
  int64_t n = dim(x, 1);
  Value pivots = full(b, ElementType::kS32, with(batch, {n}), 0);
  Value info = full(b, ElementType::kS32, batch, 0);
  for (int64_t d : x.shape.dims) {
    if (d == 0) return {x, pivots, info};
  }
  std::vector<Value> out = while_loop(
      b,
      {full(b, kS64, batch, 0), real_diagonal(b, triangle(b, x, false), hermitian), pivots, info},
      [n](FunctionBuilder& c, const std::vector<Value>& s) {
        return std::vector<Value>{any_left(c, s[0], n, "LT")};
      },
      [hermitian](FunctionBuilder& c, const std::vector<Value>& s) {
        return ldl_step(c, s, hermitian);
      });
  return {out[1], out[2], out[3]};
}

// The pivot of each matrix's row k (s64 of the batch dims), from pivots ([..., n] s32).
Value pivot_at(FunctionBuilder& b, const Value& pivots, const Value& k) {
  return entry(b, convert(b, pivots, kS64), k);
}

// sytrs's (hetrs's) first half, L D Y = B, one pivot per step: loop values (k, y).
std::vector<Value> forward_step(FunctionBuilder& b, const Value& ld, const Value& pivots,
                                bool hermitian, const std::vector<Value>& s) {
  const Value& k = s[0];
  Value y = s[1];
  const Dims& dims = y.shape.dims;
  int64_t r = y.shape.rank(), n = dim(ld, 1);
  Dims batch = batch_dims(y);
  auto like = [&](const Value& x, double c) { return full(b, x.shape.type, x.shape.dims, c); };
  Value active = compare(b, k, full(b, kS64, batch, static_cast<double>(n)), "LT");
  Value p = pivot_at(b, pivots, k);
  Value two = compare(b, p, like(p, 0), "LT");
  Value k1 = plus(b, k, 1);
  Value kp = select(b, two, sub(b, unary(b, "stablehlo.negate", p), like(p, 1)), plus(b, p, -1));
  y = swap_rows(b, y, select(b, two, k1, k), kp);
  Value ck = column(b, ld, k), ck1 = column(b, ld, k1);
  Value yk = spread(b, row(b, y, k), dims, false), yk1 = spread(b, row(b, y, k1), dims, false);
  Value below = select(b, leading_to(b, two, dims), at_index(b, dims, r - 2, k1, "GT"),
                       at_index(b, dims, r - 2, k, "GT"));
  Value rest = add(b, y, mul(b, spread(b, ck, dims, true), unary(b, "stablehlo.negate", yk)));
  Value rest2 = add(b, rest, mul(b, spread(b, ck1, dims, true), unary(b, "stablehlo.negate", yk1)));
  Value updated = select(b, below, select(b, leading_to(b, two, dims), rest2, rest), y);
  // The diagonal block: 1 / d for a 1x1 pivot, sytrs's 2x2 solve otherwise.
  Value akk = entry(b, ck, k), a21 = entry(b, ck, k1), a22 = entry(b, ck1, k1);
  Value one = mul(b, yk, leading_to(b, div(b, like(akk, 1), akk), dims));
  Value a12 = conj_if(b, a21, hermitian);  // A(k, k+1)
  Value akm1 = leading_to(b, div(b, akk, a12), dims), ak = leading_to(b, div(b, a22, a21), dims);
  Value denom = sub(b, mul(b, akm1, ak), like(akm1, 1));
  Value bkm1 = div(b, yk, leading_to(b, a12, dims)), bk = div(b, yk1, leading_to(b, a21, dims));
  Value first = div(b, sub(b, mul(b, ak, bkm1), bk), denom);
  Value second = div(b, sub(b, mul(b, akm1, bk), bkm1), denom);
  Value on_k = at_index(b, dims, r - 2, k), on_k1 = at_index(b, dims, r - 2, k1);
  Value pair = leading_to(b, two, dims);
  updated = select(b, on_k, select(b, pair, first, one), updated);
  updated = select(b, b_and(b, pair, on_k1), second, updated);
  updated = select(b, leading_to(b, active, dims), updated, s[1]);
  return {select(b, active, select(b, two, plus(b, k, 2), k1), k), updated};
}

// sytrs's second half, L^T X = Y (hetrs's L^H X = Y), from the last pivot back: loop values
// (k, x).
std::vector<Value> backward_step(FunctionBuilder& b, const Value& ld, const Value& pivots,
                                 bool hermitian, const std::vector<Value>& s) {
  const Value& k = s[0];
  Value x = s[1];
  const Dims& dims = x.shape.dims;
  int64_t r = x.shape.rank();
  Dims batch = batch_dims(x);
  auto like = [&](const Value& v, double c) { return full(b, v.shape.type, v.shape.dims, c); };
  Value active = compare(b, k, full(b, kS64, batch, 0), "GE");
  Value p = pivot_at(b, pivots, k);
  Value two = compare(b, p, like(p, 0), "LT");
  Value km1 = plus(b, k, -1);
  Value below = at_index(b, dims, r - 2, k, "GT");
  // x_j -= sum_{i > k} L(i, j) x_i for j = k (and k - 1 for a 2x2 pivot).
  auto reduce_below = [&](const Value& j) {
    Value l = spread(b, conj_if(b, column(b, ld, j), hermitian), dims, true);
    Value product = select(b, below, mul(b, l, x), full(b, x.shape.type, dims, 0));
    return spread(b, reduce(b, product, {r - 2}, constant(b, x.shape.type, 0), "stablehlo.add"),
                  dims, false);
  };
  Value on_k = at_index(b, dims, r - 2, k), on_km1 = at_index(b, dims, r - 2, km1);
  Value updated = select(b, on_k, sub(b, x, reduce_below(k)), x);
  updated = select(b, b_and(b, leading_to(b, two, dims), on_km1), sub(b, x, reduce_below(km1)),
                   updated);
  Value kp = select(b, two, sub(b, unary(b, "stablehlo.negate", p), like(p, 1)), plus(b, p, -1));
  updated = swap_rows(b, updated, k, kp);
  updated = select(b, leading_to(b, active, dims), updated, x);
  return {select(b, active, select(b, two, plus(b, k, -2), km1), k), updated};
}

// linalg_ldl_solve(LD, pivots, B, hermitian): A X = B for A = P L D L^T P^T; batch dims broadcast.
Values ldl_solve(FunctionBuilder& b, const Values& v, const Attrs& a) {
  bool hermitian = a.i("hermitian");
  Dims batch = broadcast_batch(batch_dims(v[0]), batch_dims(v[2]));
  Value ld = broadcast_leading(b, v[0], batch);
  Value pivots = broadcast_leading(b, v[1], batch, 1);
  Value rhs = broadcast_leading(b, convert(b, v[2], v[0].shape.type), batch);
  int64_t n = dim(ld, 1);
  for (int64_t d : rhs.shape.dims) {
    if (d == 0) return {rhs};
  }
  std::vector<Value> y = while_loop(
      b, {full(b, kS64, batch, 0), rhs},
      [n](FunctionBuilder& c, const std::vector<Value>& s) {
        return std::vector<Value>{any_left(c, s[0], n, "LT")};
      },
      [&](FunctionBuilder& c, const std::vector<Value>& s) {
        return forward_step(c, ld, pivots, hermitian, s);
      });
  std::vector<Value> x = while_loop(
      b, {full(b, kS64, batch, static_cast<double>(n - 1)), y[1]},
      [](FunctionBuilder& c, const std::vector<Value>& s) {
        return std::vector<Value>{any_left(c, s[0], 0, "GE")};
      },
      [&](FunctionBuilder& c, const std::vector<Value>& s) {
        return backward_step(c, ld, pivots, hermitian, s);
      });
  return {x[1]};
}

}  // namespace

void register_ldl_rules(Registry& r) {
  r.add("linalg_ldl_solve", into_result_types(ldl_solve),
        {"linalg_ldl_solve", "linalg_ldl_solve.out"});
  r.add("linalg_ldl_factor_ex", into_result_types(ldl_factor),
        {"linalg_ldl_factor_ex", "linalg_ldl_factor_ex.out"});
}

}  // namespace torchtpu::lowering
