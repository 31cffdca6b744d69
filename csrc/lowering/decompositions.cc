// QR, symmetric eigendecomposition and SVD through the decompositions XLA's compiler expands
// itself: the custom calls "Qr" (Householder QR in LAPACK's geqrf form),
// "ProductOfElementaryHouseholderReflectors" (orgqr) and "Eigh" (Jacobi). The SVD is the
// eigendecomposition of [[0, A], [A^H, 0]], whose eigenvalues are the +-singular values: its
// error is eps * |A|, not the eps * |A|^2 / s of A^H A. Least squares (lstsq) is built on both.
// Complex matrices take conjugate transposes where real ones take transposes.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lowering/matrix.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

bool empty(const Dims& dims) {
  return std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d == 0; });
}

// The leading [rows, cols] block of each matrix, zero-padded where x is smaller.
Value block(FunctionBuilder& b, const Value& x, int64_t rows, int64_t cols) {
  int64_t r = static_cast<int64_t>(x.shape.rank());
  Dims high(r, 0);
  high[r - 2] = std::max<int64_t>(rows - dim(x, 2), 0);
  high[r - 1] = std::max<int64_t>(cols - dim(x, 1), 0);
  Value padded = pad_high(b, x, high);
  return slice(b, padded, Dims(r, 0), with(batch_dims(x), {rows, cols}));
}

struct Geqrf {
  Value a, taus;
};

Geqrf geqrf(FunctionBuilder& b, const Value& x) {
  int64_t k = std::min(dim(x, 1), dim(x, 2));
  Shape taus{x.shape.type, with(batch_dims(x), {k})};
  if (empty(x.shape.dims)) return {x, full(b, x.shape.type, taus.dims, 0)};
  std::vector<Value> r = b.ops("stablehlo.custom_call", {x}, {x.shape, taus},
                               "call_target_name = \"Qr\"");
  return {r[0], r[1]};
}

// orgqr: the product of the reflectors stored below the diagonal of `a` ([..., m, n], n <= m).
Value householder_product(FunctionBuilder& b, const Value& a, const Value& taus) {
  if (empty(a.shape.dims)) return a;
  if (dim(taus, 1) == 0) {
    return block(b, identity(b, a.shape.type, batch_dims(a), dim(a, 2)), dim(a, 2), dim(a, 1));
  }
  return b.op("stablehlo.custom_call", {a, convert(b, taus, a.shape.type)}, a.shape,
              "call_target_name = \"ProductOfElementaryHouseholderReflectors\"");
}

Values geqrf_rule(FunctionBuilder& b, const Values& v, const Attrs&) {
  Geqrf g = geqrf(b, v[0]);
  return {g.a, g.taus};
}

Values householder_rule(FunctionBuilder& b, const Values& v, const Attrs&) {
  return {householder_product(b, v[0], v[1])};
}

// linalg_qr(A, mode): "reduced", "complete" or "r" (Q empty).
Values qr(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value& x = v[0];
  int64_t m = dim(x, 2), n = dim(x, 1), k = std::min(m, n);
  std::string mode = a.s("mode");
  Geqrf g = geqrf(b, x);
  int64_t q_cols = mode == "complete" ? m : k;
  Value r = triangle(b, block(b, g.a, mode == "complete" ? m : k, n), true);
  if (mode == "r") return {full(b, out_type(a), out_shape(a), 0), r};
  return {householder_product(b, block(b, g.a, m, q_cols), g.taus), r};
}

// ormqr(input, tau, other, left, transpose): op(Q) C or C op(Q) with Q from input's reflectors.
Values ormqr(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value &c = v[2];
  bool left = a.i("left");
  int64_t size = left ? dim(c, 2) : dim(c, 1);
  Value q = householder_product(b, block(b, v[0], size, size), v[1]);
  if (a.i("transpose")) q = matrix_adjoint(b, q);
  return {left ? batched_matmul(b, q, c) : batched_matmul(b, c, q)};
}

// XLA's Jacobi eigh: (eigenvectors, eigenvalues ascending) of the `lower` triangle.
std::vector<Value> eigh(FunctionBuilder& b, const Value& x, bool lower) {
  ElementType t = x.shape.type;
  Shape w{hlo::is_complex(t) ? real_part(t) : t, with(batch_dims(x), {dim(x, 1)})};
  if (empty(x.shape.dims)) return {x, full(b, t, w.dims, 0)};
  // "lower,sort,max_iter,tol": sweeps until the off-diagonal norm is below tol.
  std::string config = std::string(lower ? "1" : "0") + ",1,100," +
                       (w.type == ElementType::kF64 ? "1e-15" : "1e-7");
  return b.ops("stablehlo.custom_call", {x}, {x.shape, w},
               "call_target_name = \"Eigh\", backend_config = \"" + config + "\"");
}

// _linalg_eigh(A, UPLO, compute_v) -> (eigenvalues, eigenvectors).
Values eigh_rule(FunctionBuilder& b, const Values& v, const Attrs& a) {
  std::vector<Value> r = eigh(b, v[0], a.s("UPLO") == "L");
  Value vectors = a.i("compute_v") ? r[0] : full(b, out_type(a, 1), out_shape(a, 1), 0);
  return {r[1], vectors};
}

// Orthonormal columns ([..., p, k]) completed to an orthonormal basis of p columns: they, then
// the last p - k columns of the complete Q of their QR (orthogonal to them; singular vectors of
// a zero singular value are any such basis, LAPACK's another).
Value completed(FunctionBuilder& b, const Value& columns) {
  int64_t p = dim(columns, 2), k = dim(columns, 1);
  if (k == p) return columns;
  Geqrf g = geqrf(b, columns);
  Value q = householder_product(b, block(b, g.a, p, p), g.taus);
  int64_t r = static_cast<int64_t>(q.shape.rank());
  Dims start(r, 0);
  start[r - 1] = k;
  return concatenate(b, {columns, slice(b, q, start, q.shape.dims)}, r - 1);
}

// _linalg_svd(A, full_matrices, compute_uv, driver) -> (U, S, Vh).
Values svd(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value& x = v[0];
  int64_t m = dim(x, 2), n = dim(x, 1), k = std::min(m, n), r = x.shape.rank();
  bool uv = a.i("compute_uv"), complete = uv && a.i("full_matrices");
  ElementType t = x.shape.type, real = hlo::is_complex(t) ? real_part(t) : t;
  Dims batch = batch_dims(x);
  if (k == 0) {
    auto factor = [&](size_t i, int64_t size) {
      return complete ? identity(b, out_type(a, i), batch, size)
                      : full(b, out_type(a, i), out_shape(a, i), 0);
    };
    return {factor(0, m), full(b, real, with(batch, {0}), 0), factor(2, n)};
  }
  // [[0, A], [A^H, 0]]: A at the top right, A^H at the bottom left.
  Dims zero(r, 0);
  Value top = concatenate(b, {full(b, t, with(batch, {m, m}), 0), x}, r - 1);
  Value bottom = concatenate(b, {matrix_adjoint(b, x), full(b, t, with(batch, {n, n}), 0)},
                             r - 1);
  std::vector<Value> e = eigh(b, concatenate(b, {top, bottom}, r - 2), true);
  // The largest k eigenvalues, descending.
  int64_t size = m + n;
  Value w = slice(b, e[1], Dims(r - 1, 0), with(batch, {size}));
  Dims start(r - 1, 0);
  start.back() = size - k;
  Value s = b.op("stablehlo.reverse", {slice(b, w, start, with(batch, {size}))},
                 Shape{real, with(batch, {k})},
                 "dimensions = " + FunctionBuilder::i64_array({r - 2}));
  // Negative zeros and rounding below zero: singular values are >= 0.
  s = maximum(b, s, full(b, real, s.shape.dims, 0));
  if (!uv) {
    return {full(b, out_type(a, 0), out_shape(a, 0), 0), s,
            full(b, out_type(a, 2), out_shape(a, 2), 0)};
  }
  Dims col_start(r, 0);
  col_start[r - 1] = size - k;
  Value top_vectors = b.op("stablehlo.reverse",
                           {slice(b, e[0], col_start, with(batch, {size, size}))},
                           Shape{t, with(batch, {size, k})},
                           "dimensions = " + FunctionBuilder::i64_array({r - 1}));
  Value root2 = full(b, t, top_vectors.shape.dims, std::sqrt(2.0));
  top_vectors = binary(b, "stablehlo.multiply", top_vectors, root2);
  Value u = slice(b, top_vectors, zero, with(batch, {m, k}));
  Dims v_start(r, 0);
  v_start[r - 2] = m;
  Value vectors = slice(b, top_vectors, v_start, with(batch, {size, k}));
  if (complete) {
    u = completed(b, u);
    vectors = completed(b, vectors);
  }
  return {u, s, matrix_adjoint(b, vectors)};
}

// A x = B for full-rank A by QR: least squares (m >= n, with the squared norm of each residual)
// or, through the QR of A^T, the least-norm solution (m < n, residuals zero). Equal batch dims.
struct QrSolution {
  Value x, residuals;
};

QrSolution qr_solve(FunctionBuilder& b, const Value& a, const Value& rhs) {
  int64_t m = dim(a, 2), n = dim(a, 1), k = dim(rhs, 1), r = a.shape.rank();
  Dims batch = batch_dims(a);
  ElementType t = a.shape.type;
  ElementType real = hlo::is_complex(t) ? real_part(t) : t;
  if (m < n) {  // A^H = Q R: x = Q R^-H B
    Geqrf g = geqrf(b, matrix_adjoint(b, a));
    Value r_factor = triangle(b, block(b, g.a, m, m), true);
    Value y = triangular_solve(b, r_factor, rhs, true, false, false, adjoint_kind(r_factor));
    return {batched_matmul(b, householder_product(b, g.a, g.taus), y),
            full(b, real, with(batch, {k}), 0)};
  }
  Geqrf g = geqrf(b, a);
  Value q = householder_product(b, block(b, g.a, m, m), g.taus);
  Value qtb = batched_matmul(b, matrix_adjoint(b, q), rhs);
  Value x = triangular_solve(b, triangle(b, block(b, g.a, n, n), true), block(b, qtb, n, k), true,
                             false, false);
  Dims start(r, 0);
  start[r - 2] = n;
  Value rest = modulus(b, slice(b, qtb, start, qtb.shape.dims));
  Value residuals = reduce(b, binary(b, "stablehlo.multiply", rest, rest), {r - 2},
                           constant(b, real, 0), "stablehlo.add");
  return {x, residuals};
}

// linalg_lstsq(A, B, rcond, driver) -> (solution, residuals, rank, singular values), every
// matrix non-empty, B a matrix (the glue, csrc/aten/ops_linalg.cc, shapes vectors and empty
// inputs and decides whether the residuals are returned). solution and residuals have the
// broadcast batch, rank and singular values A's. "gels" assumes full rank: the QR solution. The
// others find the rank from the singular values (those above rcond * the largest): a full-rank A
// gets the QR solution, a rank-deficient one the least-norm solution through the SVD.
Values lstsq(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Value& x = v[0];
  ElementType t = x.shape.type, real = hlo::is_complex(t) ? real_part(t) : t;
  int64_t m = dim(x, 2), n = dim(x, 1), k = std::min(m, n);
  Dims batch = broadcast_batch(batch_dims(x), batch_dims(v[1]));
  Value rhs = broadcast_leading(b, convert(b, v[1], t), batch);
  QrSolution qr = qr_solve(b, broadcast_leading(b, x, batch), rhs);
  Dims sol_dims = qr.x.shape.dims;
  Dims a_batch = batch_dims(x);
  if (a.s("driver") == "gels") {
    return {reshape(b, qr.x, out_shape(a, 0)), qr.residuals,
            full(b, ElementType::kS64, a_batch, 0), full(b, real, with(a_batch, {k}), 0)};
  }
  Values usv = svd(b, {x}, Attrs().set("compute_uv", int64_t{1}).set("full_matrices", int64_t{0}));
  const Value &u = usv[0], &s = usv[1], &vh = usv[2];
  int64_t axis = static_cast<int64_t>(a_batch.size());
  Value largest = leading_to(b, reduce_extreme(b, s, {axis}, true), s.shape.dims);
  Value rcond = convert(b, v[2], real);
  Value cutoff = binary(b, "stablehlo.multiply", largest,
                        broadcast_in_dim(b, rcond, s.shape.dims, {}));
  Value kept = compare(b, s, cutoff, "GT");
  Value rank = reduce(b, convert(b, kept, ElementType::kS64), {axis},
                      constant(b, ElementType::kS64, 0), "stablehlo.add");
  Value inverse = select(b, kept, binary(b, "stablehlo.divide", full(b, real, s.shape.dims, 1), s),
                         full(b, real, s.shape.dims, 0));
  // V diag(1/s) U^H B over the broadcast batch.
  Value utb = batched_matmul(b, matrix_adjoint(b, broadcast_leading(b, u, batch)), rhs);
  Value scaled = binary(b, "stablehlo.multiply", utb,
                        convert(b, leading_to(b, broadcast_leading(b, inverse, batch, 1),
                                              utb.shape.dims), t));
  Value least_norm =
      batched_matmul(b, matrix_adjoint(b, broadcast_leading(b, vh, batch)), scaled);
  Value full_rank = compare(b, broadcast_leading(b, rank, batch, 0),
                            full(b, ElementType::kS64, batch, static_cast<double>(k)), "EQ");
  Value solution = select(b, leading_to(b, full_rank, sol_dims), qr.x, least_norm);
  return {reshape(b, solution, out_shape(a, 0)), qr.residuals, rank, s};
}

}  // namespace

void register_decomposition_rules(Registry& r) {
  auto add = [&r](const std::string& op, LoweringRule rule, std::vector<std::string> aten = {}) {
    r.add(op, into_result_types(std::move(rule)), std::move(aten));
  };
  add("geqrf", geqrf_rule, {"geqrf", "geqrf.a"});
  add("linalg_householder_product", householder_rule,
      {"linalg_householder_product", "linalg_householder_product.out"});
  add("linalg_qr", qr, {"linalg_qr", "linalg_qr.out"});
  add("ormqr", ormqr, {"ormqr", "ormqr.out"});
  add("_linalg_eigh", eigh_rule, {"_linalg_eigh", "_linalg_eigh.eigenvalues"});
  add("_linalg_svd", svd, {"_linalg_svd", "_linalg_svd.U"});
  add("linalg_lstsq", lstsq);
}

}  // namespace torchtpu::lowering
