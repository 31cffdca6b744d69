// Cholesky, triangular solves and LU with partial pivoting, and what is built on them (solve,
// inverse, determinants). Cholesky and triangular solves are XLA's own ops; LU is a while loop
// over the columns, LAPACK's unblocked getf2 (first largest |pivot|, rows swapped, rank-1 update),
// so pivots and factors come out as LAPACK's (a complex pivot is the first largest |re| + |im|,
// as LAPACK's izamax). Complex matrices take conjugate transposes where real ones take transposes
// (A = L L^H, A^H X = B).
#include <algorithm>
#include <optional>

#include "lowering/matrix.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

Dims upto(int64_t n) {
  Dims d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = i;
  return d;
}

Value s64(FunctionBuilder& b, const Dims& dims, double v) {
  return full(b, ElementType::kS64, dims, v);
}

struct LU {
  Value lu, pivots, info;  // pivots and info s32, LAPACK's 1-based convention
};

// The lower Cholesky factor, zeros above the diagonal.
Value lower_cholesky(FunctionBuilder& b, const Value& x) {
  return triangle(b, b.op("stablehlo.cholesky", {x}, x.shape, "lower = true"), false);
}

// LAPACK's info for a factorization: the 1-based index of the first diagonal entry of `factor`
// that is not `ok`, 0 when all are; s32 of the batch dims.
Value first_failure(FunctionBuilder& b, const Value& ok) {
  const Dims& dims = ok.shape.dims;
  int64_t axis = static_cast<int64_t>(dims.size()) - 1, n = dims.back();
  Value position = binary(b, "stablehlo.add", iota(b, ElementType::kS64, dims, axis),
                          s64(b, dims, 1));
  Value first = reduce(b, select(b, ok, s64(b, dims, n + 1), position), {axis},
                       constant(b, ElementType::kS64, n + 1), "stablehlo.minimum");
  Dims batch = first.shape.dims;
  first = select(b, compare(b, first, s64(b, batch, n + 1), "EQ"), s64(b, batch, 0), first);
  return convert(b, first, ElementType::kS32);
}

Values cholesky(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value l = lower_cholesky(b, v[0]);
  return {a.i("upper") ? matrix_adjoint(b, l) : l};
}

LU lu_factor(FunctionBuilder& b, const Value& x, bool pivot);

// linalg_cholesky_ex: (L, info); info > 0 is the order of the first leading minor that is not
// positive-definite. XLA's factor of such a matrix is NaN throughout, so info comes from the
// pivots of an unpivoted LU of the symmetric matrix the lower triangle defines: the first k are
// positive exactly when the k-th leading minor is positive-definite.
Values cholesky_ex(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Values l = cholesky(b, v, a);
  Value symmetric = binary(b, "stablehlo.add", triangle(b, v[0], false),
                           matrix_adjoint(b, triangle(b, v[0], false, -1)));
  Value d = diagonal(b, lu_factor(b, symmetric, false).lu);
  if (hlo::is_complex(d.shape.type)) d = real_and_imag(b, d).first;  // a Hermitian's: real
  return {l[0], first_failure(b, compare(b, d, full(b, d.shape.type, d.shape.dims, 0), "GT"))};
}

// operands: self (B), A; solves (A) X = B for A = L L^H (or U^H U when `upper`).
Value cholesky_solve(FunctionBuilder& b, const Value& rhs, const Value& factor, bool upper) {
  const std::string adjoint = adjoint_kind(factor);
  Value y = triangular_solve(b, factor, rhs, true, !upper, false, upper ? adjoint : "NO_TRANSPOSE");
  return triangular_solve(b, factor, y, true, !upper, false, upper ? "NO_TRANSPOSE" : adjoint);
}

Values cholesky_solve_helper(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {cholesky_solve(b, v[0], v[1], a.i("upper"))};
}

Values cholesky_inverse(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value eye = identity(b, v[0].shape.type, batch_dims(v[0]), dim(v[0], 1));
  return {cholesky_solve(b, eye, v[0], a.i("upper"))};
}

// triangular_solve(self=B, A, upper, transpose, unitriangular) -> (solution, cloned A).
Values triangular_solve_rule(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = triangular_solve(b, v[1], v[0], true, !a.i("upper"), a.i("unitriangular"),
                             a.i("transpose") ? "TRANSPOSE" : "NO_TRANSPOSE");
  return {x, broadcast_to(b, v[1], out_shape(a, 1))};
}

// linalg_solve_triangular(self=A, B, upper, left, unitriangular).
Values solve_triangular(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {triangular_solve(b, v[0], v[1], a.i("left"), !a.i("upper"), a.i("unitriangular"))};
}

// One column of getf2: loop values (j, a, pivots, info).
std::vector<Value> lu_column(FunctionBuilder& b, const std::vector<Value>& s, bool pivot) {
  const Value &j = s[0], &piv = s[2];
  Value a = s[1], info = s[3];
  const Dims& dims = a.shape.dims;
  int64_t r = static_cast<int64_t>(dims.size()), m = dims[r - 2];
  ElementType t = a.shape.type;
  Dims batch = batch_dims(a), rows_dims = with(batch, {m});
  Value rows = iota(b, ElementType::kS64, rows_dims, r - 2);
  Value jr = broadcast_in_dim(b, j, rows_dims, {});
  Value jb = broadcast_in_dim(b, j, batch, {});
  Value p = jb;
  if (pivot) {
    p = first_largest(b, pick(b, a, r - 1, j), compare(b, rows, jr, "GE")).second;
  }
  Value on_j = leading_to(b, compare(b, rows, jr, "EQ"), dims);
  Value on_p = leading_to(b, compare(b, rows, leading_to(b, p, rows_dims), "EQ"), dims);
  Value zero = full(b, t, dims, 0);
  Value row_j = reduce(b, select(b, on_j, a, zero), {r - 2}, constant(b, t, 0), "stablehlo.add");
  Value row_p = reduce(b, select(b, on_p, a, zero), {r - 2}, constant(b, t, 0), "stablehlo.add");
  Dims along_rows = with(upto(r - 2), {r - 1});
  Value spread_p = broadcast_in_dim(b, row_p, dims, along_rows);
  a = select(b, on_j, spread_p, select(b, on_p, broadcast_in_dim(b, row_j, dims, along_rows), a));
  Value pv = pick(b, row_p, r - 2, j);
  Value singular = compare(b, pv, full(b, t, batch, 0), "EQ");
  Value j1 = convert(b, binary(b, "stablehlo.add", jb, s64(b, batch, 1)), ElementType::kS32);
  Value first = b_and(b, singular, compare(b, info, full(b, ElementType::kS32, batch, 0), "EQ"));
  info = select(b, first, j1, info);
  Value column = pick(b, a, r - 1, j);
  Value scaled = select(b, leading_to(b, singular, rows_dims), column,
                        binary(b, "stablehlo.divide", column, leading_to(b, pv, rows_dims)));
  Value below = leading_to(b, compare(b, rows, jr, "GT"), dims);
  Value cols = iota(b, ElementType::kS64, dims, r - 1);
  Value jm = broadcast_in_dim(b, j, dims, {});
  Value l = leading_to(b, scaled, dims);
  Value update = b_and(b, below, compare(b, cols, jm, "GT"));
  Value outer = binary(b, "stablehlo.multiply", l, spread_p);
  a = select(b, update, binary(b, "stablehlo.subtract", a, outer), a);
  a = select(b, b_and(b, below, compare(b, cols, jm, "EQ")), l, a);
  const Dims& kd = piv.shape.dims;
  Value at_k = compare(b, iota(b, ElementType::kS64, kd, r - 2), broadcast_in_dim(b, j, kd, {}),
                       "EQ");
  Value p1 = convert(b, binary(b, "stablehlo.add", p, s64(b, batch, 1)), ElementType::kS32);
  Value pivots = select(b, at_k, leading_to(b, p1, kd), piv);
  return {binary(b, "stablehlo.add", j, constant(b, ElementType::kS64, 1)), a, pivots, info};
}

Value loop_below(FunctionBuilder& b, const Value& j, int64_t k) {
  return compare(b, j, constant(b, ElementType::kS64, static_cast<double>(k)), "LT");
}

LU lu_factor(FunctionBuilder& b, const Value& x, bool pivot) {
  int64_t k = std::min(dim(x, 1), dim(x, 2));
  Dims batch = batch_dims(x);
  Value pivots = convert(b, binary(b, "stablehlo.add", iota(b, ElementType::kS64, with(batch, {k}),
                                                            batch.size()),
                                   s64(b, with(batch, {k}), 1)),
                         ElementType::kS32);
  Value info = full(b, ElementType::kS32, batch, 0);
  if (k == 0) return {x, pivots, info};
  std::vector<Value> out = while_loop(
      b, {constant(b, ElementType::kS64, 0), x, pivots, info},
      [k](FunctionBuilder& c, const std::vector<Value>& s) {
        return std::vector<Value>{loop_below(c, s[0], k)};
      },
      [pivot](FunctionBuilder& c, const std::vector<Value>& s) { return lu_column(c, s, pivot); });
  return {out[1], out[2], out[3]};
}

// The row permutation `pivots` (sequential 1-based swaps) make: row i of P^T A is row perm[i]
// of A; s64 [..., m].
Value permutation(FunctionBuilder& b, const Value& pivots, int64_t m) {
  const Dims& kd = pivots.shape.dims;
  int64_t axis = static_cast<int64_t>(kd.size()) - 1, k = kd.back();
  Dims batch(kd.begin(), kd.end() - 1), md = with(batch, {m});
  Value perm = iota(b, ElementType::kS64, md, axis);
  if (k == 0) return perm;
  Value zero_based = binary(b, "stablehlo.subtract", convert(b, pivots, ElementType::kS64),
                            s64(b, kd, 1));
  std::vector<Value> out = while_loop(
      b, {constant(b, ElementType::kS64, 0), perm},
      [k](FunctionBuilder& c, const std::vector<Value>& s) {
        return std::vector<Value>{loop_below(c, s[0], k)};
      },
      [&](FunctionBuilder& c, const std::vector<Value>& s) {
        const Value &j = s[0], &perm = s[1];
        Value p = pick(c, zero_based, axis, j);
        Value rows = iota(c, ElementType::kS64, md, axis);
        Value on_j = compare(c, rows, broadcast_in_dim(c, j, md, {}), "EQ");
        Value on_p = compare(c, rows, leading_to(c, p, md), "EQ");
        Value at_j = leading_to(c, pick(c, perm, axis, j), md);
        Value at_p = leading_to(c, reduce(c, select(c, on_p, perm, s64(c, md, 0)), {axis},
                                          constant(c, ElementType::kS64, 0), "stablehlo.add"),
                                md);
        Value next = select(c, on_j, at_p, select(c, on_p, at_j, perm));
        return std::vector<Value>{
            binary(c, "stablehlo.add", j, constant(c, ElementType::kS64, 1)), next};
      });
  return out[1];
}

// Row i of the result is row perm[i] of x (or, `inverse`, row perm[i] of the result is row i of
// x); perm and x share batch dims. Selects and sums of zeros: exact.
Value permute_rows(FunctionBuilder& b, const Value& perm, const Value& x, bool inverse) {
  Dims batch = batch_dims(x);
  int64_t nb = static_cast<int64_t>(batch.size()), m = dim(x, 2), c = dim(x, 1);
  Dims big = with(batch, {m, m, c});
  Dims pair = with(batch, {m, m});
  Value on = compare(b, leading_to(b, perm, pair), iota(b, ElementType::kS64, pair, nb + 1), "EQ");
  Value on4 = leading_to(b, on, big);
  Value x4 = broadcast_in_dim(b, x, big, with(upto(nb), {inverse ? nb : nb + 1, nb + 2}));
  ElementType t = x.shape.type;
  return reduce(b, select(b, on4, x4, full(b, t, big, 0)), {inverse ? nb : nb + 1},
                constant(b, t, 0), "stablehlo.add");
}

// Solves A X = rhs (A^H X = rhs when `adjoint`) from A's LU factors; equal batch dims.
Value lu_solve(FunctionBuilder& b, const Value& lu, const Value& perm, const Value& rhs,
               bool adjoint) {
  if (!adjoint) {
    Value y = permute_rows(b, perm, rhs, false);
    y = triangular_solve(b, lu, y, true, true, true);
    return triangular_solve(b, lu, y, true, false, false);
  }
  Value y = triangular_solve(b, lu, rhs, true, false, false, adjoint_kind(lu));
  y = triangular_solve(b, lu, y, true, true, true, adjoint_kind(lu));
  return permute_rows(b, perm, y, true);
}

// op(A) X = B (`left`) or X op(A) = B, op the identity or (`adjoint`) the adjoint; A's LU
// factors and B broadcast over their batch dims.
Value solve_with(FunctionBuilder& b, const Value& lu, const Value& pivots, const Value& rhs,
                 bool left, bool adjoint) {
  Dims batch = broadcast_batch(batch_dims(lu), batch_dims(rhs));
  Value f = broadcast_leading(b, lu, batch);
  Value perm = permutation(b, broadcast_leading(b, pivots, batch, 1), dim(lu, 2));
  Value r = broadcast_leading(b, convert(b, rhs, lu.shape.type), batch);
  if (left) return lu_solve(b, f, perm, r, adjoint);
  // X op(A) = B is op(A)^H X^H = B^H.
  return matrix_adjoint(b, lu_solve(b, f, perm, matrix_adjoint(b, r), !adjoint));
}

Values lu_factor_ex(FunctionBuilder& b, const Values& v, const Attrs& a) {
  LU f = lu_factor(b, v[0], a.i("pivot"));
  return {f.lu, f.pivots, f.info};
}

// linalg_lu_solve(LU, pivots, B, left, adjoint).
Values lu_solve_rule(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return {solve_with(b, v[0], v[1], v[2], a.i("left"), a.i("adjoint"))};
}

// _linalg_solve_ex(A, B, left) -> (result, LU, pivots, info); a B of A's shape without its last
// dim is a (batch of) vector(s), as in PyTorch.
Values solve_ex(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value &A = v[0], &B = v[1];
  bool left = a.i("left");
  Dims a_rows(A.shape.dims.begin(), A.shape.dims.end() - 1);
  bool vector = B.shape.rank() == 1 || (B.shape.rank() + 1 == A.shape.rank() && B.shape.dims == a_rows);
  Value rhs = B;
  if (vector) {
    Dims d = B.shape.dims;
    d.insert(left ? d.end() : d.end() - 1, 1);
    rhs = reshape(b, B, d);
  }
  LU f = lu_factor(b, A, true);
  Value x = solve_with(b, f.lu, f.pivots, rhs, left, false);
  return {convert(b, reshape(b, x, out_shape(a)), out_type(a)), f.lu, f.pivots, f.info};
}

Values inv_ex(FunctionBuilder& b, const Values& v, const Attrs& a) {
  LU f = lu_factor(b, v[0], true);
  Value eye = identity(b, v[0].shape.type, batch_dims(v[0]), dim(v[0], 1));
  return {solve_with(b, f.lu, f.pivots, eye, true, false), f.info};
}

// (-1)^(the number of pivots that swap), in `type`, of the batch dims.
Value permutation_sign(FunctionBuilder& b, const Value& pivots, ElementType type) {
  const Dims& kd = pivots.shape.dims;
  int64_t axis = static_cast<int64_t>(kd.size()) - 1;
  Value position = binary(b, "stablehlo.add", iota(b, ElementType::kS32, kd, axis),
                          full(b, ElementType::kS32, kd, 1));
  Value swaps = reduce(b, convert(b, compare(b, pivots, position, "NE"), ElementType::kS64),
                       {axis}, constant(b, ElementType::kS64, 0), "stablehlo.add");
  Dims batch = swaps.shape.dims;
  Value odd = binary(b, "stablehlo.remainder", swaps, s64(b, batch, 2));
  return convert(b, binary(b, "stablehlo.subtract", s64(b, batch, 1),
                           binary(b, "stablehlo.multiply", s64(b, batch, 2), odd)),
                 type);
}

Values det(FunctionBuilder& b, const Values& v, const Attrs& a) {
  LU f = lu_factor(b, v[0], true);
  ElementType t = v[0].shape.type;
  Value d = diagonal(b, f.lu);
  Value product = reduce(b, d, {static_cast<int64_t>(d.shape.rank()) - 1}, constant(b, t, 1),
                         "stablehlo.multiply");
  return {binary(b, "stablehlo.multiply", product, permutation_sign(b, f.pivots, t)), f.lu,
          f.pivots};
}

// _linalg_slogdet(A) -> (sign, logabsdet, LU, pivots).
Values slogdet(FunctionBuilder& b, const Values& v, const Attrs& a) {
  LU f = lu_factor(b, v[0], true);
  ElementType t = v[0].shape.type;
  Value d = diagonal(b, f.lu);
  int64_t axis = static_cast<int64_t>(d.shape.rank()) - 1;
  // sign: the product of d / |d| (of a complex d; sgn, 0 where d is) and the permutation's.
  Value magnitude = modulus(b, d);
  Value unit = hlo::is_complex(t) ? binary(b, "stablehlo.divide", d, convert(b, magnitude, t))
                                  : unary(b, "stablehlo.sign", d);
  unit = select(b, compare(b, magnitude, full(b, magnitude.shape.type, magnitude.shape.dims, 0),
                           "EQ"),
                full(b, t, d.shape.dims, 0), unit);
  Value sign = reduce(b, unit, {axis}, constant(b, t, 1), "stablehlo.multiply");
  Value log = reduce(b, unary(b, "stablehlo.log", magnitude), {axis},
                     constant(b, magnitude.shape.type, 0), "stablehlo.add");
  return {binary(b, "stablehlo.multiply", sign, permutation_sign(b, f.pivots, t)), log, f.lu,
          f.pivots};
}

// (P, L, U) with A = P L U from LU factors; an output PyTorch leaves empty stays empty.
Values unpack(FunctionBuilder& b, const Value& lu, const Value& pivots, const Attrs& a) {
  int64_t m = dim(lu, 2), n = dim(lu, 1), k = std::min(m, n);
  ElementType t = lu.shape.type;
  Dims batch = batch_dims(lu);
  auto empty = [&](int out) {
    Dims d = out_shape(a, out);
    int64_t count = 1;
    for (int64_t x : d) count *= x;
    return count == 0 ? std::optional<Value>(full(b, out_type(a, out), d, 0)) : std::nullopt;
  };
  Values out;
  if (auto e = empty(0)) {
    out.push_back(*e);
  } else {
    Value perm = permutation(b, pivots, m);
    Dims pair = with(batch, {m, m});
    // P[r, i] = 1 where perm[i] == r.
    int64_t nb = static_cast<int64_t>(batch.size());
    Value on = compare(b, broadcast_in_dim(b, perm, pair, with(upto(nb), {nb + 1})),
                       iota(b, ElementType::kS64, pair, nb), "EQ");
    out.push_back(convert(b, on, t));
  }
  Dims zero(lu.shape.rank(), 0);
  if (auto e = empty(1)) {
    out.push_back(*e);
  } else {
    Value l = slice(b, triangle(b, lu, false, -1), zero, with(batch, {m, k}));
    Value eye = slice(b, identity(b, t, batch, m), zero, with(batch, {m, k}));
    out.push_back(binary(b, "stablehlo.add", l, eye));
  }
  if (auto e = empty(2)) {
    out.push_back(*e);
  } else {
    out.push_back(slice(b, triangle(b, lu, true), zero, with(batch, {k, n})));
  }
  return out;
}

// lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots).
Values lu_unpack(FunctionBuilder& b, const Values& v, const Attrs& a) {
  return unpack(b, v[0], v[1], a);
}

// linalg_lu(A, pivot) -> (P, L, U).
Values linalg_lu(FunctionBuilder& b, const Values& v, const Attrs& a) {
  LU f = lu_factor(b, v[0], a.i("pivot"));
  return unpack(b, f.lu, f.pivots, a);
}

}  // namespace

Value solve(FunctionBuilder& b, const Value& a, const Value& rhs) {
  LU f = lu_factor(b, a, true);
  return solve_with(b, f.lu, f.pivots, rhs, true, false);
}

void register_factorization_rules(Registry& r) {
  auto add = [&r](const std::string& op, LoweringRule rule, std::vector<std::string> aten = {}) {
    r.add(op, into_result_types(std::move(rule)), std::move(aten));
  };
  add("linalg_cholesky_ex", cholesky_ex, {"linalg_cholesky_ex", "linalg_cholesky_ex.L"});
  add("cholesky_inverse", cholesky_inverse, {"cholesky_inverse", "cholesky_inverse.out"});
  add("_cholesky_solve_helper", cholesky_solve_helper,
      {"_cholesky_solve_helper", "_cholesky_solve_helper.out"});
  add("triangular_solve", triangular_solve_rule, {"triangular_solve", "triangular_solve.X"});
  add("linalg_solve_triangular", solve_triangular,
      {"linalg_solve_triangular", "linalg_solve_triangular.out"});
  add("linalg_lu_factor_ex", lu_factor_ex, {"linalg_lu_factor_ex", "linalg_lu_factor_ex.out"});
  add("linalg_lu_solve", lu_solve_rule, {"linalg_lu_solve", "linalg_lu_solve.out"});
  add("lu_unpack", lu_unpack, {"lu_unpack", "lu_unpack.out"});
  add("linalg_lu", linalg_lu, {"linalg_lu", "linalg_lu.out"});
  add("_linalg_solve_ex", solve_ex, {"_linalg_solve_ex", "_linalg_solve_ex.result"});
  add("linalg_inv_ex", inv_ex, {"linalg_inv_ex", "linalg_inv_ex.inverse"});
  add("_linalg_det", det, {"_linalg_det", "_linalg_det.result"});
  add("_linalg_slogdet", slogdet, {"_linalg_slogdet", "_linalg_slogdet.sign"});
}

}  // namespace torchtpu::lowering
