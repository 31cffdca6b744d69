// out= forms of ops whose functional form has a tpu kernel but whose out= form has only the
// CPU's: the functional form's results, resized into and copied to the out= tensors (what
// PyTorch's generated out= wrappers do), after the CPU kernels' checks of the out= dtypes. The
// functional form also writes the arguments it mutates (batch norm's running statistics), which
// the CPU fallback of the out= form did not copy back: their schemas do not mark them written.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>
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

namespace {

// The result dtypes of `form` on `inputs`, from its meta function (nothing runs, nothing is
// written).
std::vector<at::ScalarType> result_dtypes(const c10::OperatorHandle& form,
                                          const std::vector<c10::IValue>& inputs) {
  torch::jit::Stack stack;
  for (const c10::IValue& v : inputs) {
    if (v.isTensor() && v.toTensor().defined()) {
      const at::Tensor& t = v.toTensor();
      stack.emplace_back(at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta)));
    } else {
      stack.push_back(v);
    }
  }
  form.callBoxed(&stack);
  std::vector<at::ScalarType> dtypes;
  for (const c10::IValue& r : stack) dtypes.push_back(r.toTensor().scalar_type());
  return dtypes;
}

// The CPU kernels' rules: mvlgamma's out= takes any dtype its result can be cast to; the others'
// their results' dtypes only.
void check_out_dtype(const c10::FunctionSchema& schema, at::ScalarType result,
                     const at::Tensor& out) {
  if (schema.name() == "aten::mvlgamma") {
    TORCH_CHECK(at::canCast(result, out.scalar_type()), "mvlgamma: result type ", result,
                " can't be cast to the desired output type ", out.scalar_type());
    return;
  }
  TORCH_CHECK(out.scalar_type() == result, "expected scalar type ", result, " but found ",
              out.scalar_type());
}

}  // namespace

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
  std::vector<c10::IValue> inputs;
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].is_out()) {
      outs.push_back(args[i].toTensor());
    } else {
      inputs.push_back(args[i]);
    }
  }
  std::vector<at::ScalarType> dtypes = result_dtypes(form, inputs);
  TORCH_INTERNAL_ASSERT(dtypes.size() == outs.size(), schema.name(), ": ", dtypes.size(),
                        " results for ", outs.size(), " out= tensors");
  for (size_t i = 0; i < outs.size(); ++i) check_out_dtype(schema, dtypes[i], outs[i]);
  for (c10::IValue& v : inputs) stack->push_back(std::move(v));
  form.callBoxed(stack);
  std::vector<c10::IValue> results = torch::jit::pop(*stack, outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    const at::Tensor& result = results[i].toTensor();
    at::native::resize_output(outs[i], result.sizes());
    outs[i].copy_(result);
    stack->push_back(outs[i]);
  }
}

}  // namespace torchtpu::aten
