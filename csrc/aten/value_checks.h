// Checks on the values of an op's tensors that a device program cannot raise by itself
// (value_checks.cc).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/device_asserts.h"
#include "engine/program.h"
#include "lowering/registry.h"

namespace torchtpu::aten {

// Every mode checks an op's index tensors against the dimensions they index on the device
// (engine/device_asserts.h): a value outside raises PyTorch's CPU error for it (IndexError or
// RuntimeError) at the next synchronization, naming the op and the Python line that called it.
struct IndexAssert {
  at::Tensor index;
  int64_t low, high;  // the values it may hold: [low, high), or `ignore`
  std::optional<int64_t> ignore;
  engine::AssertCheck check;  // PyTorch's CPU error for a value outside
  int64_t id;
};
// The checks of an op bound to `rule`. Called before the op records: it may take the GIL (for
// the caller's line), which must never wait while the device's recording lock is held.
std::vector<IndexAssert> index_asserts(const std::string& rule, const c10::FunctionSchema& schema,
                                       const std::vector<c10::IValue>& args);
// Checks that each flag (a bool or integer tensor) holds only zeros, else raising its message as a
// RuntimeError for `op` ("aten::histogram"): for kernels of their own, with no schema to go by.
std::vector<IndexAssert> zero_asserts(const std::string& op,
                                      const std::vector<std::pair<at::Tensor, std::string>>& flags);
// Records them in the op's program.
void record_index_asserts(engine::Program& p, const std::vector<IndexAssert>& asserts);
// TORCHTPU_INDEX_CHECKS=0 turns those checks off (on by default).
void set_index_checks(bool enabled);
// PyTorch's linear algebra kernels raise LinAlgError where a factorization fails (a matrix that
// is singular, or not positive-definite), reading its `info` on the host (on CUDA too): the
// lowered ops that take check_errors=True do the same after they run, and so does
// cholesky_inverse (its factor's zero diagonal entries), each with its PyTorch message.
void check_linalg_errors(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                         const std::vector<at::Tensor>& outputs);
// Debug mode with TORCHTPU_DEBUG_NANS=1: the first op whose result holds a NaN or an infinity.
void check_finite(const c10::FunctionSchema& schema, const std::vector<at::Tensor>& outputs);

}  // namespace torchtpu::aten
