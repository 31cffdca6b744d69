// PyTorch's CPU kernel as the judge of a call's arguments, where the meta function is not a
// faithful one (cpu_verdict.cc).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <vector>

namespace torchtpu::aten {

// Whether a call needs the CPU's verdict even when the meta function accepts it. The meta
// functions serving the Meta key are mostly PyTorch's Python references, looser than the CPU
// kernels in these places: an out= tensor whose dtype the CPU refuses (all/any into float,
// amax into another float type, neg into double), empty inputs (max() of nothing, a reduction
// over a dimension of size 0), operands of different floating dtypes in one product
// (float32 @ float64), complex operands of ops that order values (sort, clamp), and a few ops
// by name (bucketize, complex, masked_scatter). `seeded`: the op draws random numbers
// (nondeterministic_seeded).
bool needs_cpu_verdict(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                       bool elementwise, bool seeded);
// Which of the call's input tensors (counted over its non-out arguments, lists included) out=
// argument `out` is, or -1: part of a call's signature, since an out= that is an input is
// judged otherwise (ldexp_ runs as ldexp.out(self, self, other)).
int same_input(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
               size_t out);
// Runs the op on CPU copies of its arguments (fresh tensors for out=, but an out= that is an
// input stays that input, as the CPU resizes one and refuses to resize the other) and lets the
// CPU's exception, with its type and message, propagate; returns when the CPU accepts the call.
void cpu_verdict(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args);

}  // namespace torchtpu::aten
