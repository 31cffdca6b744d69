// PyTorch's CPU kernel as the judge of a call's arguments, where the meta function is not a
// faithful one (cpu_verdict.cc).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>

#include <vector>

namespace torchtpu::aten {

// Whether the overlaps of an op's written arguments follow TensorIterator's rule (no partial
// overlap with an input), which the kernel applies itself: elementwise ops, random ops
// (nondeterministic_seeded), and every op while a compiled graph captures (its capture reads no
// values). The CPU's verdict judges the other ops' overlaps, by each op's own rule.
bool overlaps_by_iterator_rule(const c10::OperatorHandle& op, bool elementwise);
// Whether a call needs the CPU's verdict even when the meta function accepts it. The meta
// functions serving the Meta key are mostly PyTorch's Python references, looser than the CPU
// kernels in these places: an out= tensor whose dtype the CPU refuses (all/any into float,
// amax into another float type, neg into double), empty inputs (max() of nothing, a reduction
// over a dimension of size 0), operands of different floating dtypes in one product
// (float32 @ float64), complex operands of ops that order values (sort, clamp), and a few ops
// by name (bucketize, complex, masked_scatter), and a written argument that overlaps another
// where overlaps_by_iterator_rule does not hold.
bool needs_cpu_verdict(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                       bool elementwise);
// Whether argument `i` is one the op writes (in-place self, out=).
bool written(const c10::FunctionSchema& schema, size_t i);
// The other argument tensors that share a storage with written argument `i`, each as its
// position among the call's tensors and how their memory overlaps (at::MemOverlapStatus),
// appended to `found` as pairs: part of a call's signature, since the CPU judges an overlap by
// op (ldexp_ runs as ldexp.out(self, self, other); index_add_ refuses any overlap,
// TensorIterator's ops a partial one; masked_fill_ reads its 0-d value first).
void written_overlaps(const std::vector<c10::IValue>& args, size_t i,
                      c10::SmallVectorImpl<int64_t>& found);
// Runs the op on CPU copies of its arguments (fresh tensors for out=, but an out= that shares an
// input's storage stays a view of it, as the CPU resizes one and refuses to resize or overlap
// the other) and lets the CPU's exception, with its type and message, propagate; returns when
// the CPU accepts the call, with the CPU's run of it.
struct CpuRun {
  std::vector<c10::IValue> inputs;   // the arguments, as the CPU ran on them
  std::vector<c10::IValue> results;  // what it returned
};
CpuRun cpu_verdict(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args);

}  // namespace torchtpu::aten
