// The CPU's verdict on a call: the op runs once per call signature on CPU copies of its
// arguments, only when the meta function cannot be trusted to refuse what the CPU refuses (or
// refused with another exception type), so a user's mistake raises what it raises on the CPU.
#include "aten/cpu_verdict.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>

#include <optional>
#include <set>
#include <string>

#include "aten/tensor_view.h"
#include "engine/eager.h"

namespace torchtpu::aten {

int same_input(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
               size_t out) {
  if (!args[out].isTensor() || !args[out].toTensor().defined()) return -1;
  const c10::TensorImpl* impl = args[out].toTensor().unsafeGetTensorImpl();
  int position = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (schema.arguments()[i].is_out()) continue;
    if (args[i].isTensor()) {
      if (args[i].toTensor().unsafeGetTensorImpl() == impl) return position;
      ++position;
    } else if (args[i].isTensorList()) {
      for (const c10::IValue& t : args[i].toListRef()) {
        if (t.toTensor().unsafeGetTensorImpl() == impl) return position;
        ++position;
      }
    }
  }
  return -1;
}

bool needs_cpu_verdict(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& args,
                       bool elementwise, bool seeded) {
  if (engine::capturing()) return false;  // a compiled graph's capture reads no values
  // Meta functions that accept what the CPU refuses: bucketize's boundaries of more than one
  // dimension, complex's parts of two dtypes, masked_scatter's uint8 mask.
  static const std::set<std::string> loose = {"aten::bucketize", "aten::complex",
                                              "aten::masked_scatter", "aten::masked_scatter_"};
  if (loose.count(schema.name())) return true;
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
  // One CPU copy per tensor, so a tensor passed twice (ldexp_ runs as ldexp.out(self, self, ...),
  // cat's out= may be one of its inputs) is one tensor there too: the CPU refuses to resize such
  // an out=, or to write it while reading it, where it resizes a fresh one.
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> copies;
  auto copy = [&copies](const at::Tensor& t) {
    if (!t.defined() || t.is_cpu()) return t;
    for (const auto& [impl, made] : copies) {
      if (impl == t.unsafeGetTensorImpl()) return made;
    }
    return copies.emplace_back(t.unsafeGetTensorImpl(), t.to(at::kCPU)).second;
  };
  torch::jit::Stack stack(args.size());
  {
    // Copies to the host, outside any autograd recording.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!arguments[i].is_out() || !args[i].isTensor()) stack[i] = map_tensors(args[i], copy);
    }
    // An out= tensor is its input's copy; one that overlaps itself (expanded) keeps its strides,
    // which the CPU refuses; any other is an empty tensor, which the CPU resizes.
    for (size_t i = 0; i < args.size(); ++i) {
      if (!arguments[i].is_out() || !args[i].isTensor()) continue;
      const at::Tensor& out = args[i].toTensor();
      int input = same_input(op.schema(), args, i);
      if (!out.defined()) {
        stack[i] = out;
      } else if (input >= 0) {
        stack[i] = copy(out);
      } else if (at::has_internal_overlap(out) == at::MemOverlap::Yes) {
        stack[i] = at::empty_strided(out.sizes(), out.strides(), out.options().device(at::kCPU));
      } else {
        stack[i] = at::empty({0}, out.options().device(at::kCPU));
      }
    }
    op.callBoxed(stack);
  }
}

}  // namespace torchtpu::aten
