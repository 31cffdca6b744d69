// Checks on the values of an op's tensors that a device program cannot raise by itself.
#include "aten/value_checks.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/ops/all.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>

#include <cstdlib>

namespace torchtpu::aten {

// Debug mode: the checks a CPU kernel makes on index values, which a device program cannot
// raise. Each index tensor against the size of the dimension it indexes.
void check_index_values(const lowering::AtenBinding& binding, const c10::FunctionSchema& schema,
                        const std::vector<c10::IValue>& args) {
  const std::string& rule = binding.rule;
  auto arg = [&](const char* name) -> const c10::IValue* {
    for (size_t i = 0; i < args.size(); ++i) {
      if (schema.arguments()[i].name() == name) return &args[i];
    }
    return nullptr;
  };
  auto check = [&](const at::Tensor& index, int64_t dim, int64_t size) {
    if (!index.defined() || index.numel() == 0) return;
    int64_t low = index.min().item<int64_t>(), high = index.max().item<int64_t>();
    int64_t bad = high >= size ? high : low < -size ? low : 0;
    TORCH_CHECK_INDEX(high < size && low >= -size, schema.name(), ": index ", bad,
                      " is out of bounds for dimension ", dim, " with size ", size);
  };
  const c10::IValue* self = arg("self");
  if (rule == "index_select" || rule == "gather" || rule == "scatter" || rule == "scatter_add") {
    const at::Tensor& x = self->toTensor();
    int64_t dim = at::maybe_wrap_dim(arg("dim")->toInt(), std::max<int64_t>(x.dim(), 1));
    check(arg("index")->toTensor(), dim, x.dim() == 0 ? 1 : x.size(dim));
  } else if (rule == "index" || rule == "index_put") {
    const at::Tensor& x = self->toTensor();
    int64_t dim = 0;
    for (const c10::IValue& e : arg("indices")->toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) check(e.toTensor(), dim, x.size(dim));
      ++dim;
    }
  } else if (rule == "embedding_backward") {
    check(arg("indices")->toTensor(), 0, arg("num_weights")->toInt());
  }
}

// Debug mode with TORCHTPU_DEBUG_NANS=1: the first op whose result holds a NaN or an infinity.
void check_finite(const c10::FunctionSchema& schema, const std::vector<at::Tensor>& outputs) {
  static const bool enabled = [] {
    const char* v = std::getenv("TORCHTPU_DEBUG_NANS");
    return v != nullptr && std::string(v) != "0" && std::string(v) != "";
  }();
  // The check runs ops itself (isfinite may decompose into abs, ne, ...): not those.
  static thread_local bool checking = false;
  if (!enabled || checking) return;
  checking = true;
  struct Reset {
    ~Reset() { checking = false; }
  } reset;
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || !out.is_floating_point() || out.numel() == 0) continue;
    TORCH_CHECK(at::isfinite(out).all().item<bool>(), "torchtpu debug: ", schema.name(),
                " produced a NaN or an infinity (TORCHTPU_DEBUG_NANS=1)");
  }
}

}  // namespace torchtpu::aten
