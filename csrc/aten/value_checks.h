// Checks on the values of an op's tensors that a device program cannot raise by itself
// (value_checks.cc).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <vector>

#include "lowering/registry.h"

namespace torchtpu::aten {

// Debug mode: each index tensor of the op against the size of the dimension it indexes, read to
// the host; IndexError naming the op, the index and the size.
void check_index_values(const lowering::AtenBinding& binding, const c10::FunctionSchema& schema,
                        const std::vector<c10::IValue>& args);
// Debug mode with TORCHTPU_DEBUG_NANS=1: the first op whose result holds a NaN or an infinity.
void check_finite(const c10::FunctionSchema& schema, const std::vector<at::Tensor>& outputs);

}  // namespace torchtpu::aten
