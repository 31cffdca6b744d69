// The HLO building blocks every rule shares: casts, broadcasting, constants, shape ops.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/builder.h"
#include "lowering/attrs.h"

namespace torchtpu::lowering {

using hlo::ElementType;
using hlo::FunctionBuilder;
using hlo::Shape;
using hlo::Value;
using Dims = std::vector<int64_t>;

// PyTorch's casts: to bool is `!= 0`, complex to real keeps the real part.
Value convert(FunctionBuilder& b, const Value& v, ElementType type);
Value reshape(FunctionBuilder& b, const Value& v, const Dims& dims);
// NumPy/PyTorch broadcasting: trailing dimensions align.
Value broadcast_to(FunctionBuilder& b, const Value& v, const Dims& dims);
Value broadcast_in_dim(FunctionBuilder& b, const Value& v, const Dims& dims,
                       const Dims& broadcast_dimensions);
Value slice(FunctionBuilder& b, const Value& v, const Dims& start, const Dims& limit);
Value transpose(FunctionBuilder& b, const Value& v, const Dims& permutation);
Value pad_end(FunctionBuilder& b, const Value& v, int64_t count);  // rank 1
// Pads each dimension at its end with `value` (`high[k]` elements on dimension k).
Value pad_high(FunctionBuilder& b, const Value& v, const Dims& high, double value = 0);
Value concatenate(FunctionBuilder& b, const std::vector<Value>& values, int64_t dim);
Value iota(FunctionBuilder& b, ElementType type, const Dims& dims, int64_t dim);

Value constant(FunctionBuilder& b, ElementType type, double value);
Value full(FunctionBuilder& b, ElementType type, const Dims& dims, double value);

// Elementwise ops on operands of one shape and type.
Value unary(FunctionBuilder& b, const std::string& op, const Value& x);
Value binary(FunctionBuilder& b, const std::string& op, const Value& x, const Value& y);
// direction: EQ NE LT LE GT GE.
Value compare(FunctionBuilder& b, const Value& x, const Value& y, const std::string& direction);
Value select(FunctionBuilder& b, const Value& pred, const Value& on_true, const Value& on_false);

// The type of a complex type's real and imaginary parts; a real type itself.
ElementType real_part(ElementType type);
// float16 and bfloat16 compute in float32, as PyTorch's kernels do ("opmath").
ElementType opmath(ElementType type);
// Output `k`'s type and shape as PyTorch's meta function gave them ("type"/"shape", "type1"...).
ElementType out_type(const Attrs& attrs, int k = 0);
Dims out_shape(const Attrs& attrs, int k = 0);
// The computation type of an elementwise op: "compute_type", else the output type.
ElementType compute_type(const Attrs& attrs);
// Dimension attribute(s) made non-negative; an absent or empty list means every dimension.
Dims reduction_dims(const Attrs& attrs, const std::string& key, int64_t rank);
int64_t normalize_dim(int64_t dim, int64_t rank);

// stablehlo.reduce of `x` over `dims` with the binary `op` ("stablehlo.add", "stablehlo.multiply").
Value reduce(FunctionBuilder& b, const Value& x, const Dims& dims, const Value& init,
             const std::string& op);
// PyTorch's maximum / minimum: a NaN in either operand gives NaN. XLA's CPU max and min do not
// promise that (fast min/max), so every max or min of floats goes through these.
Value maximum(FunctionBuilder& b, const Value& x, const Value& y);
Value minimum(FunctionBuilder& b, const Value& x, const Value& y);
// The max (`largest`) or min of `x` over `dims`, NaN-propagating; an empty slice gives the
// identity (-inf / +inf, or the type's extreme value).
Value reduce_extreme(FunctionBuilder& b, const Value& x, const Dims& dims, bool largest);
// Shape `x`'s reduction result back to `dims` (keepdim or not): a reshape.
Value keep_dims(FunctionBuilder& b, const Value& reduced, const Dims& full_rank_dims,
                const Dims& reduced_axes);
// stablehlo.scatter of `updates` into `base` at `indices`, adding to (or replacing) what is
// there; `dimension_numbers` is the scatter_dimension_numbers attribute.
Value scatter(FunctionBuilder& b, const Value& base, const Value& indices, const Value& updates,
              bool add, const std::string& dimension_numbers);
// Rows `index` [n] (s64, in range) of `table` [R, D]: [n, D].
Value gather_rows(FunctionBuilder& b, const Value& table, const Value& index);
// Scatter of `updates` [n, D] into rows `index` [n] of `base` [R, D], combined by `op`: "max" and
// "min" (NaN-propagating), or a binary stablehlo op ("stablehlo.add", "stablehlo.multiply").
Value scatter_rows(FunctionBuilder& b, const Value& base, const Value& index, const Value& updates,
                   const std::string& op);
// Inclusive prefix sums of `x` along `axis` (a reduce_window).
Value prefix_sum(FunctionBuilder& b, const Value& x, int64_t axis);
// A typed 0-d operand broadcast to `dims` in `type`.
Value splat(FunctionBuilder& b, const Value& scalar, ElementType type, const Dims& dims);
// The smallest (or largest) value of a type, exactly: -inf / +inf for floats.
Value extreme(FunctionBuilder& b, ElementType type, bool largest);

// Row-major contiguous, ignoring dimensions of size 1.
bool is_dense(const Dims& sizes, const Dims& strides);

// |x|; for a complex x its modulus, a real of the part type.
Value modulus(FunctionBuilder& b, const Value& x);

// Logical and / or of predicates.
Value b_and(FunctionBuilder& b, const Value& x, const Value& y);
Value b_or(FunctionBuilder& b, const Value& x, const Value& y);

// Converts to `type` and broadcasts to `dims`: how operands meet in an elementwise op.
Value promote(FunctionBuilder& b, const Value& v, ElementType type, const Dims& dims);

// x != x.
Value is_nan(FunctionBuilder& b, const Value& x);
// The bits of `x` as the integer type `type` of its width (stablehlo.bitcast_convert).
Value bitcast(FunctionBuilder& b, const Value& x, ElementType type);
// An integer constant of `dims`, exact for any 64-bit value (full() goes through a double).
Value int_full(FunctionBuilder& b, ElementType type, const Dims& dims, int64_t value);
// x's sign bit, as a predicate: true for -0.0 and negative NaNs; false for unsigned and bool.
Value sign_bit(FunctionBuilder& b, const Value& x);
// float64 for float32 (and narrower), else the type itself: where XLA's float32 math strays
// more than a few ulp from the CPU's, a rule computes in this and rounds once.
ElementType wide(ElementType type);

// stablehlo.while: runs `body` on the state while `cond` (a 0-d predicate of it) holds.
using LoopFn = std::function<std::vector<Value>(FunctionBuilder&, const std::vector<Value>&)>;
std::vector<Value> while_loop(FunctionBuilder& b, const std::vector<Value>& state,
                              const LoopFn& cond, const LoopFn& body);

// PyTorch's name of the scalar type ("Float", "Long", "Bool"), as its "not implemented for" errors
// spell it.
const char* scalar_type_name(ElementType type);

// The real and imaginary parts of a complex `x`, in its part type.
std::pair<Value, Value> real_and_imag(FunctionBuilder& b, const Value& x);

// The complex value of `type` with parts `re` and `im` (of its part type and one shape).
Value make_complex(FunctionBuilder& b, const Value& re, const Value& im, ElementType type);

// The complex conjugate of `x`; a real value is its own.
Value conjugate(FunctionBuilder& b, const Value& x);

// x ** y as pow.Tensor_Tensor computes it (of complex values the CPU's cpow, math.cc).
Value tensor_power(FunctionBuilder& b, const Value& x, const Value& y);

// log(exp(x) + exp(y)) of complex x and y, as the CPU computes it: log1p(exp(lo - hi)) + hi, hi
// the operand with the larger real part; NaN in a part of either operand gives NaN in both parts,
// equal infinite real parts give lo (-inf) or log(exp(lo) + exp(hi)) (+inf).
Value complex_log_add_exp(FunctionBuilder& b, const Value& x, const Value& y);

// x / y; of complex values by Smith's scaling, as the CPU divides (XLA's division differed at
// zeros and infinities: 0 / (inf + inf i) was 0, not NaN; -1 / (-0 + 0i) inf + NaN i, not -inf).
Value divide(FunctionBuilder& b, const Value& x, const Value& y);

}  // namespace torchtpu::lowering
