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

bool written(const c10::FunctionSchema& schema, size_t i) {
  const c10::AliasInfo* alias = schema.arguments()[i].alias_info();
  return alias != nullptr && alias->isWrite();
}

void written_overlaps(const std::vector<c10::IValue>& args, size_t i,
                      c10::SmallVectorImpl<int64_t>& found) {
  if (!args[i].isTensor() || !args[i].toTensor().defined()) return;
  const at::Tensor& target = args[i].toTensor();
  if (!target.has_storage()) return;
  const c10::StorageImpl* storage = target.storage().unsafeGetStorageImpl();
  int64_t position = 0;
  auto visit = [&](const at::Tensor& t) {
    if (t.defined() && t.has_storage() && t.storage().unsafeGetStorageImpl() == storage) {
      found.push_back(position);
      found.push_back(static_cast<int64_t>(at::get_overlap_status(target, t)));
    }
    ++position;
  };
  for (size_t j = 0; j < args.size(); ++j) {
    if (j == i) continue;
    if (args[j].isTensor()) {
      visit(args[j].toTensor());
    } else if (args[j].isTensorList()) {
      for (const c10::IValue& t : args[j].toListRef()) visit(t.toTensor());
    }
  }
}

bool overlaps_by_iterator_rule(const c10::OperatorHandle& op, bool elementwise) {
  return elementwise || engine::capturing() || op.hasTag(at::Tag::nondeterministic_seeded);
}

bool needs_cpu_verdict(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                       bool elementwise) {
  if (engine::capturing()) return false;  // a compiled graph's capture reads no values
  const c10::FunctionSchema& schema = op.schema();
  bool seeded = op.hasTag(at::Tag::nondeterministic_seeded);
  // Meta functions that accept what the CPU refuses: bucketize's boundaries of more than one
  // dimension, complex's parts of two dtypes, masked_scatter's uint8 mask.
  static const std::set<std::string> loose = {"aten::bucketize", "aten::complex",
                                              "aten::masked_scatter", "aten::masked_scatter_"};
  if (loose.count(schema.name())) return true;
  if (!overlaps_by_iterator_rule(op, elementwise)) {
    c10::SmallVector<int64_t, 8> found;
    for (size_t i = 0; i < args.size(); ++i) {
      if (written(schema, i)) written_overlaps(args, i, found);
    }
    for (size_t k = 1; k < found.size(); k += 2) {
      if (found[k] != static_cast<int64_t>(at::MemOverlapStatus::No)) return true;
    }
  }
  // A norm's backward takes the statistics its forward saved, float32 for a half-type input (as
  // on CUDA), where the CPU's forward saves them in the input's type and its backward refuses
  // others; batch norm in eval mode saves empty ones (`save_mean`, `save_invstd`).
  const std::string& name = schema.name();
  const std::string suffix = "norm_backward";
  bool saved_statistics = name.size() > suffix.size() &&
                          name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  // CPU kernels that die on an empty input (weight norm: SIGFPE, an integer division by the
  // empty dimension; pdist's backward of no rows, segment_reduce with offsets past empty data:
  // SIGSEGV), which their lowerings take.
  static const std::set<std::string> dies_on_empty = {
      "aten::_weight_norm_interface", "aten::_weight_norm_interface_backward",
      "aten::_pdist_backward", "aten::segment_reduce", "aten::_segment_reduce_backward"};
  bool empty_verdict = !dies_on_empty.count(name);
  std::optional<at::ScalarType> floating;
  bool mixed_floating = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (schema.arguments()[i].is_out()) return true;
    bool saved = saved_statistics && schema.arguments()[i].name().rfind("save_", 0) == 0;
    for (const at::Tensor& t : tensors_of(args[i])) {
      if (!t.defined() || is_cpu_scalar(t)) continue;
      if (t.numel() == 0 && !saved && empty_verdict) return true;
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
  return mixed_floating && !elementwise && !saved_statistics;
}

CpuRun cpu_verdict(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& arguments = schema.arguments();
  // A storage that a written argument shares with another argument is copied whole, once, and
  // each tensor of it is a view of that copy, so the CPU sees the overlaps the call has.
  struct Shared {
    const c10::StorageImpl* storage;
    at::Tensor source, whole;  // a tensor of the storage; the copy of all of it
  };
  std::vector<Shared> shared;
  for (size_t i = 0; i < args.size(); ++i) {
    c10::SmallVector<int64_t, 8> found;
    if (written(schema, i)) written_overlaps(args, i, found);
    if (found.empty() || !args[i].toTensor().is_privateuseone()) continue;
    const at::Tensor& t = args[i].toTensor();
    shared.push_back({t.storage().unsafeGetStorageImpl(), t, {}});
  }
  auto shared_by = [&shared](const at::Tensor& t) -> Shared* {
    for (Shared& s : shared) {
      if (s.storage == t.storage().unsafeGetStorageImpl()) return &s;
    }
    return nullptr;
  };
  // One CPU copy per tensor, so a tensor passed twice is one tensor there too.
  std::vector<std::pair<const c10::TensorImpl*, at::Tensor>> copies;
  auto copy = [&](const at::Tensor& t) {
    if (!t.defined() || t.is_cpu()) return t;
    for (const auto& [impl, made] : copies) {
      if (impl == t.unsafeGetTensorImpl()) return made;
    }
    Shared* s = shared_by(t);
    if (s == nullptr || s->source.scalar_type() != t.scalar_type()) {
      return copies.emplace_back(t.unsafeGetTensorImpl(), t.to(at::kCPU)).second;
    }
    if (!s->whole.defined()) {
      int64_t elements = static_cast<int64_t>(s->storage->nbytes()) / t.element_size();
      s->whole = s->source.as_strided({elements}, {1}, 0).to(at::kCPU);
    }
    at::Tensor view = s->whole.as_strided(t.sizes(), t.strides(), t.storage_offset());
    return copies.emplace_back(t.unsafeGetTensorImpl(), view).second;
  };
  torch::jit::Stack stack(args.size());
  {
    // Copies to the host, outside any autograd recording.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!arguments[i].is_out() || !args[i].isTensor()) stack[i] = map_tensors(args[i], copy);
    }
    // An out= tensor that shares an input's storage is a view of its copy; one that overlaps
    // itself (expanded) keeps its strides, which the CPU refuses; any other is an empty tensor,
    // which the CPU resizes.
    for (size_t i = 0; i < args.size(); ++i) {
      if (!arguments[i].is_out() || !args[i].isTensor()) continue;
      const at::Tensor& out = args[i].toTensor();
      if (!out.defined()) {
        stack[i] = out;
      } else if (shared_by(out) != nullptr) {
        stack[i] = copy(out);
      } else if (at::has_internal_overlap(out) == at::MemOverlap::Yes) {
        stack[i] = at::empty_strided(out.sizes(), out.strides(), out.options().device(at::kCPU));
      } else {
        stack[i] = at::empty({0}, out.options().device(at::kCPU));
      }
    }
    std::vector<c10::IValue> inputs = stack;
    op.callBoxed(stack);
    return {std::move(inputs), std::move(stack)};
  }
}

}  // namespace torchtpu::aten
