// Checks on the values of an op's tensors that a device program cannot raise by itself
// (value_checks.cc).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <vector>

#include "engine/program.h"
#include "lowering/registry.h"

namespace torchtpu::aten {

// Every mode: records in `p` (after the op bound to `rule`) a device-side check of each of the
// op's index tensors against the dimension it indexes (engine/device_asserts.h). A value outside
// raises PyTorch's CPU error for it (IndexError or RuntimeError) at the next synchronization,
// naming the op and the Python line that called it.
void assert_index_values(engine::Program& p, const std::string& rule,
                         const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args);
// TORCHTPU_INDEX_CHECKS=0 turns those checks off (on by default).
void set_index_checks(bool enabled);
// Where the op was called from ("file.py:12"), given by the Python bindings.
void set_python_location(std::string (*location)());
// Debug mode with TORCHTPU_DEBUG_NANS=1: the first op whose result holds a NaN or an infinity.
void check_finite(const c10::FunctionSchema& schema, const std::vector<at::Tensor>& outputs);

}  // namespace torchtpu::aten
