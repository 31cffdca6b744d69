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

}  // namespace

int same_input(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
               size_t out) {
  if (!args[out].isTensor() || !args[out].toTensor().defined()) return -1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!schema.arguments()[i].is_out() && args[i].isTensor() &&
        args[i].toTensor().is_same(args[out].toTensor())) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

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
    // Copies to the host, outside any autograd recording; a fresh tensor for each out= one,
    // which the CPU resizes, unless it is one of the inputs.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    for (size_t i = 0; i < args.size(); ++i) {
      stack.push_back(arguments[i].is_out() && args[i].isTensor()
                          ? at::empty({0}, args[i].toTensor().options().device(at::kCPU))
                          : map_tensors(args[i], cpu_copy));
    }
    for (size_t i = 0; i < args.size(); ++i) {
      int input = arguments[i].is_out() ? same_input(op.schema(), args, i) : -1;
      if (input >= 0) stack[i] = stack[input];
    }
    op.callBoxed(stack);
  }
}

}  // namespace torchtpu::aten
