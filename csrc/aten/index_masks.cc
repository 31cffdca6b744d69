// Boolean and uint8 masks in an index list (x[mask], x[mask] = v): PyTorch's rule is that a mask
// stands for the coordinates of its true elements.
#include <ATen/core/dispatch/Dispatcher.h>

#include "aten/ops.h"
#include "aten/tensor_view.h"

namespace torchtpu::aten {

bool expand_index_masks(const c10::OperatorHandle& op, std::vector<c10::IValue>& args,
                        torch::jit::Stack* stack) {
  for (c10::IValue& v : args) {
    if (!v.isList() || v.isIntList() || v.isBoolList() || v.isDoubleList() || v.isTensorList()) {
      continue;
    }
    bool has_mask = false;
    for (const at::Tensor& t : tensors_of(v)) {
      has_mask = has_mask || t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
    }
    if (!has_mask) continue;
    c10::List<std::optional<at::Tensor>> expanded;
    for (const c10::IValue& e : v.toListRef()) {
      if (!e.isTensor() || (e.toTensor().scalar_type() != at::kBool &&
                            e.toTensor().scalar_type() != at::kByte)) {
        expanded.push_back(e.isTensor() ? std::optional<at::Tensor>(e.toTensor()) : std::nullopt);
        continue;
      }
      at::Tensor coords = torchtpu::aten::nonzero(e.toTensor());
      for (int64_t d = 0; d < coords.size(1); ++d) expanded.push_back(coords.select(1, d));
    }
    v = expanded;
    for (c10::IValue& a : args) stack->push_back(std::move(a));
    op.callBoxed(stack);
    return true;
  }
  return false;
}

}  // namespace torchtpu::aten
