// out= forms of ops whose functional form has a tpu kernel but whose out= form has only the
// CPU's: the functional form's results, resized into and copied to the out= tensors (what
// PyTorch's generated out= wrappers do). The functional form also writes the arguments it
// mutates (batch norm's running statistics), which the CPU fallback of the out= form did not
// copy back: their schemas do not mark them written.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <c10/util/Exception.h>

#include <string>
#include <vector>

#include "aten/ops.h"

namespace torchtpu::aten {

const std::vector<std::string>& out_forms_of_functional_kernels() {
  static const std::vector<std::string> names = {
      "mvlgamma.out",          "narrow_copy.out",
      "native_batch_norm.out", "_native_batch_norm_legit.out",
      "_native_batch_norm_legit.no_stats_out", "_batch_norm_with_update.out"};
  return names;
}

void out_form_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  std::string overload = schema.overload_name();
  // "out" -> "", "no_stats_out" -> "no_stats"
  std::string functional = overload == "out" ? "" : overload.substr(0, overload.size() - 4);
  c10::OperatorHandle form =
      c10::Dispatcher::singleton().findSchemaOrThrow(schema.name().c_str(), functional.c_str());
  const auto& arguments = schema.arguments();
  std::vector<c10::IValue> args = torch::jit::pop(*stack, arguments.size());
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].is_out()) {
      outs.push_back(args[i].toTensor());
    } else {
      stack->push_back(args[i]);
    }
  }
  form.callBoxed(stack);
  std::vector<c10::IValue> results = torch::jit::pop(*stack, form.schema().returns().size());
  TORCH_INTERNAL_ASSERT(results.size() == outs.size(), schema.name(), ": ", results.size(),
                        " results for ", outs.size(), " out= tensors");
  for (size_t i = 0; i < outs.size(); ++i) {
    const at::Tensor& result = results[i].toTensor();
    at::native::resize_output(outs[i], result.sizes());
    outs[i].copy_(result);
    stack->push_back(outs[i]);
  }
}

}  // namespace torchtpu::aten
