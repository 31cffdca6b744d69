// The HLO building blocks every rule shares: casts, broadcasting, constants, shape ops.
#pragma once

#include <string>
#include <vector>

#include "hlo/builder.h"

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

// Row-major contiguous, ignoring dimensions of size 1.
bool is_dense(const Dims& sizes, const Dims& strides);

// Converts to `type` and broadcasts to `dims`: how operands meet in an elementwise op.
Value promote(FunctionBuilder& b, const Value& v, ElementType type, const Dims& dims);

}  // namespace torchtpu::lowering
