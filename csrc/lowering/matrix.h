// Batched matrix building blocks shared by the factorization rules: operands are [..., m, n],
// every leading dimension a batch dimension.
#pragma once

#include <initializer_list>
#include <string>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {

Dims batch_dims(const Value& x);  // all but the last two dims
int64_t dim(const Value& x, int64_t from_end);  // dim(x, 1): the last dim's size
Dims with(Dims dims, std::initializer_list<int64_t> tail);  // dims + tail
// NumPy broadcasting of two batch shapes.
Dims broadcast_batch(const Dims& x, const Dims& y);
// `x` broadcast to `batch` + its own last `keep` dims.
Value broadcast_leading(FunctionBuilder& b, const Value& x, const Dims& batch, int keep = 2);
Value matrix_transpose(FunctionBuilder& b, const Value& x);  // swaps the last two dims
Value matrix_adjoint(FunctionBuilder& b, const Value& x);    // conjugate transpose
// LAPACK's magnitude for pivoting: |re| + |im| of a complex x (its cabs1), |x| of a real one.
Value abs1(FunctionBuilder& b, const Value& x);
// BLAS's i?amax over the last axis of `v` where `mask` holds: (the largest abs1, 0 where nothing
// is masked; its first index, the axis's size where nothing is). Where a NaN is masked, as the
// CPU's LAPACK chooses: `first_nan` (its LDL) takes the first NaN; otherwise (its LU, as the
// reference BLAS) a NaN is taken only as the first masked element, and skipped after it.
std::pair<Value, Value> first_largest(FunctionBuilder& b, const Value& v, const Value& mask,
                                      bool first_nan = false);
// The transpose_a of a triangular solve by A^H: ADJOINT for a complex A, TRANSPOSE for a real one.
std::string adjoint_kind(const Value& a);
// x @ y with equal batch dims, computed in x's type.
Value batched_matmul(FunctionBuilder& b, const Value& x, const Value& y);
Value identity(FunctionBuilder& b, ElementType type, const Dims& batch, int64_t n);
// The elements of `x` above (`upper`) or below the diagonal shifted by `offset`, zeros elsewhere
// (triu / tril).
Value triangle(FunctionBuilder& b, const Value& x, bool upper, int64_t offset = 0);
// The main diagonal [..., min(m, n)].
Value diagonal(FunctionBuilder& b, const Value& x);
// Solves op(a) x = rhs (left) or x op(a) = rhs with triangular a; batch dims broadcast.
// transpose: NO_TRANSPOSE, TRANSPOSE or ADJOINT.
Value triangular_solve(FunctionBuilder& b, const Value& a, const Value& rhs, bool left, bool lower,
                       bool unit_diagonal, const std::string& transpose = "NO_TRANSPOSE");
// Solves A X = rhs for square A by LU with partial pivoting (factorizations.cc); equal batch dims.
Value solve(FunctionBuilder& b, const Value& a, const Value& rhs);
// x[..., :, j] along the last dim with a (possibly loop-carried) 0-d s64 `j`: the selected
// column over dim `axis` summed out exactly (every other element is a zero).
Value pick(FunctionBuilder& b, const Value& x, int64_t axis, const Value& j);
// The first `n` dims of `v` placed at the front of `dims` (a value of the batch dims spread over
// each matrix, or a vector along rows).
Value leading_to(FunctionBuilder& b, const Value& v, const Dims& dims);

// `rule` with each result converted to the output's dtype: these rules compute in the input's
// type, and an out= tensor of another dtype receives the result cast, as on the CPU.
LoweringRule into_result_types(LoweringRule rule);

}  // namespace torchtpu::lowering
