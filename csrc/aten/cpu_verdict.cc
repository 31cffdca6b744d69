// The CPU's verdict on a call: the op runs once per call signature on CPU copies of its
// arguments, only when the meta function cannot be trusted to refuse what the CPU refuses (or
// refused with another exception type), so a user's mistake raises what it raises on the CPU.
#include "aten/cpu_verdict.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <optional>

#include "aten/tensor_view.h"
#include "engine/eager.h"

namespace torchtpu::aten {
namespace {

at::Tensor cpu_copy(const at::Tensor& t) {
  if (!t.defined() || t.is_cpu()) return t;
  return t.to(at::kCPU);
}

c10::IValue cpu_argument(const c10::Argument& arg, const c10::IValue& v) {
  if (arg.is_out() && v.isTensor()) {
    return at::empty({0}, v.toTensor().options().device(at::kCPU));  // the CPU resizes it
  }
  return map_tensors(v, cpu_copy);
}

}  // namespace

bool needs_cpu_verdict(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                       bool elementwise, bool seeded) {
  if (engine::capturing()) return false;  // a compiled graph's capture reads no values
  std::optional<at::ScalarType> floating;
  bool mixed_floating = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (schema.arguments()[i].is_out()) return true;
    for (const at::Tensor& t : tensors_of(args[i])) {
      if (!t.defined() || is_cpu_scalar(t)) continue;
      if (t.numel() == 0) return true;
      // Complex values have no order, and the meta functions do not refuse them where the CPU
      // does (sort, topk, median, clamp, maximum, nansum, ...). A random op is left out: its CPU
      // run would draw from the CPU's generator.
      if (at::isComplexType(t.scalar_type()) && !seeded) return true;
      if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) {
        mixed_floating |= floating && *floating != t.scalar_type();
        floating = t.scalar_type();
      }
    }
  }
  // Elementwise ops promote mixed operands; products, convolutions and the like refuse them.
  return mixed_floating && !elementwise;
}

void cpu_verdict(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  const auto& arguments = op.schema().arguments();
  torch::jit::Stack stack;
  {
    // Copies to the host, outside any autograd recording.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    for (size_t i = 0; i < args.size(); ++i) stack.push_back(cpu_argument(arguments[i], args[i]));
    op.callBoxed(stack);
  }
}

}  // namespace torchtpu::aten
