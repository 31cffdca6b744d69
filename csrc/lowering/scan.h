// Cumulative scans along one axis (reduce_window over the prefix), shared by the cumulative ops
// and the order statistics that need a running value.
#pragma once

#include <functional>
#include <vector>

#include "lowering/helpers.h"

namespace torchtpu::lowering {

// Combines two tuples of scalars (one per scanned operand) into one; must be associative.
using TupleCombiner = std::function<std::vector<Value>(
    FunctionBuilder&, const std::vector<Value>& lhs, const std::vector<Value>& rhs)>;

// Inclusive scans of `xs` (one shape) along `axis`, starting from `inits` (0-d, one per operand).
std::vector<Value> scan(FunctionBuilder& b, const std::vector<Value>& xs,
                        const std::vector<Value>& inits, int64_t axis,
                        const TupleCombiner& combine);

// The running max (`largest`) or min along `axis` with the position where it was reached: the
// latest on ties, and a NaN wins (the latest NaN), as PyTorch's cummax/cummin.
std::pair<Value, Value> running_extreme(FunctionBuilder& b, const Value& x, int64_t axis,
                                        bool largest);

}  // namespace torchtpu::lowering
