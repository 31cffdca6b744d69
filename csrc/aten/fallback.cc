// Ops without a tpu lowering run on the CPU through PyTorch's boxed fallback: a warning once per
// op, a count in torchtpu.metrics(), or an error under TORCHTPU_CPU_FALLBACK=error.
#include <ATen/native/CPUFallback.h>

#include <atomic>
#include <map>
#include <mutex>

#include "aten/ops.h"
#include "engine/eager.h"

namespace torchtpu::aten {
namespace {

std::atomic<bool> fallback_is_error{false};
std::mutex counts_mutex;
std::map<std::string, int64_t> counts;

}  // namespace

void set_cpu_fallback_policy(const std::string& policy) {
  TORCH_CHECK(policy == "warn" || policy == "error",
              "torchtpu: TORCHTPU_CPU_FALLBACK must be 'warn' or 'error', not '", policy, "'");
  fallback_is_error = policy == "error";
}

std::vector<std::pair<std::string, int64_t>> cpu_fallback_counts() {
  std::lock_guard<std::mutex> lock(counts_mutex);
  return {counts.begin(), counts.end()};
}

namespace {

// Runs the op on the CPU with its kernel for `cpu_key` (CPU, or NestedTensorCPU for nested
// tensors), after the policy's check, the warning and the count.
void fall_back(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey cpu_key) {
  const c10::OperatorName& name = op.schema().operator_name();
  std::string op_name = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error, "torchtpu: ", op_name,
                              " has no tpu lowering, and TORCHTPU_CPU_FALLBACK=error forbids "
                              "running it on the CPU");
  bool first;
  {
    std::lock_guard<std::mutex> lock(counts_mutex);
    first = counts[op_name]++ == 0;
  }
  if (first) {
    TORCH_WARN("torchtpu: ", op_name, " has no tpu lowering yet, so it runs on the CPU (its "
               "tensors are copied there and back). Set TORCHTPU_CPU_FALLBACK=error to make this "
               "an error.");
  }
  if (engine::capturing()) {
    engine::capture_breaks_because(op_name + " has no tpu lowering and runs on the CPU");
  }
  at::native::cpu_fallback(op, stack, /*error_on_views=*/false, cpu_key);
}

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  fall_back(op, stack, c10::DispatchKey::CPU);
}

void nested_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // The CPU's nested kernels take packed matrices; torchtpu's views of padded tensors are not.
  // (Arguments the op writes stay as they are.)
  const std::vector<c10::Argument>& arguments = op.schema().arguments();
  size_t first = stack->size() - arguments.size();
  for (size_t i = 0; i < arguments.size(); ++i) {
    c10::IValue& value = (*stack)[first + i];
    bool written = arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite();
    if (written) continue;
    if (value.isTensor() && value.toTensor().is_nested()) {
      value = contiguous_nested(value.toTensor());
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> tensors = value.toTensorVector();
      for (at::Tensor& t : tensors) {
        if (t.defined() && t.is_nested()) t = contiguous_nested(t);
      }
      value = c10::IValue(tensors);
    }
  }
  fall_back(op, stack, c10::DispatchKey::NestedTensorCPU);
}

}  // namespace torchtpu::aten
