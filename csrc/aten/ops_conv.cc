// Ops whose output geometry torchtpu computes itself: convolution_overrideable and its backward
// (PyTorch's hooks for a backend's own convolution) and native_batch_norm (which also updates the
// running statistics it is given, outside its returns). The lowering rules do the rest.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <ATen/OpMathType.h>
#include <c10/core/DeviceGuard.h>

#include "aten/cpu_verdict.h"
#include "aten/ops.h"
#include "aten/tensor_view.h"
#include "lowering/registry.h"

namespace torchtpu::aten {
namespace {

// The layout of a convolution's results, as PyTorch's CPU and CUDA kernels choose it: channels
// last where the input or the weight is (4 or 5 dimensions), contiguous otherwise.
at::MemoryFormat conv_layout(const at::Tensor& input, const at::Tensor& weight) {
  for (const at::Tensor* t : {&input, &weight}) {
    at::MemoryFormat f = t->suggest_memory_format();
    if (f == at::MemoryFormat::ChannelsLast || f == at::MemoryFormat::ChannelsLast3d) return f;
  }
  return at::MemoryFormat::Contiguous;
}

}  // namespace

// (input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
void convolution_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = take_arguments(op, stack);
  const at::Tensor& input = args[0].toTensor();
  const at::Tensor& weight = args[1].toTensor();
  std::vector<int64_t> stride = args[3].toIntVector(), padding = args[4].toIntVector(),
                       dilation = args[5].toIntVector(), output_padding = args[7].toIntVector();
  bool transposed = args[6].toBool();
  int64_t groups = args[8].toInt();
  c10::Device device = common_device({&input, &weight});
  c10::DeviceGuard guard(device);
  // Mixed dtypes and empty inputs: the CPU's checks and messages (it refuses mixed dtypes).
  // convolution_overrideable has no CPU kernel; convolution takes the same arguments.
  if (needs_cpu_verdict(op, args, false)) {
    static const c10::OperatorHandle convolution =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
    cpu_verdict(convolution, args);
  }
  std::vector<int64_t> out{input.size(0), transposed ? weight.size(1) * groups : weight.size(0)};
  for (size_t i = 0; i + 2 < static_cast<size_t>(input.dim()); ++i) {
    int64_t in = input.size(i + 2), k = weight.size(i + 2);
    int64_t size = transposed ? (in - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) +
                                    output_padding[i] + 1
                              : (in + 2 * padding[i] - dilation[i] * (k - 1) - 1) / stride[i] + 1;
    TORCH_CHECK(size > 0, "Calculated output size is too small for input of size ",
                input.sizes());
    out.push_back(size);
  }
  at::Tensor result = at::empty(out, input.options().memory_format(conv_layout(input, weight)));
  if (result.numel() > 0) run_rule("convolution", op.schema(), args, {result}, device);
  stack->push_back(result);
}

// (grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups,
// output_mask) -> (grad_input, grad_weight, grad_bias)
void convolution_backward_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = take_arguments(op, stack);
  const at::Tensor& grad = args[0].toTensor();
  const at::Tensor& input = args[1].toTensor();
  const at::Tensor& weight = args[2].toTensor();
  std::vector<bool> mask;
  for (bool m : args[9].toBoolList()) mask.push_back(m);
  c10::Device device = common_device({&grad, &input, &weight});
  c10::DeviceGuard guard(device);
  at::TensorOptions layout = at::TensorOptions().memory_format(conv_layout(input, weight));
  at::Tensor gi = mask[0] ? at::empty(input.sizes(), input.options().merge_in(layout))
                          : at::Tensor();
  at::Tensor gw = mask[1] ? at::empty(weight.sizes(), weight.options().merge_in(layout))
                          : at::Tensor();
  at::Tensor gb = mask[2] ? at::empty({grad.size(1)}, grad.options()) : at::Tensor();
  if (grad.numel() > 0 && input.numel() > 0) {
    try {
      run_rule("convolution_backward", op.schema(), args, {gi, gw, gb}, device);
    } catch (const lowering::Unsupported&) {
      for (c10::IValue& a : args) stack->push_back(std::move(a));
      cpu_fallback(op, stack);
      return;
    }
  } else {
    for (at::Tensor* t : {&gi, &gw, &gb}) {
      if (t->defined()) t->zero_();
    }
  }
  stack->push_back(gi);
  stack->push_back(gw);
  stack->push_back(gb);
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?, training, momentum, eps)
//   -> (out, save_mean, save_invstd); in training, the running statistics are updated in place.
// The _native_batch_norm_legit overloads (what AOTAutograd's graphs call) take the same with
// running statistics required, without them (.no_stats), or without `training`
// (_no_training): their arguments are brought to native_batch_norm's. _batch_norm_with_update
// (what nn.BatchNorm calls in training) is the training case, with an empty `reserve` result.
void batch_norm_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = take_arguments(op, stack);
  bool with_update = op.schema().name() == "aten::_batch_norm_with_update";
  if (op.schema().overload_name() == "no_stats") {
    args.insert(args.begin() + 3, {c10::IValue(), c10::IValue()});
  } else if (op.schema().name() == "aten::_native_batch_norm_legit_no_training") {
    args.insert(args.begin() + 5, c10::IValue(false));
  } else if (with_update) {
    args.insert(args.begin() + 5, c10::IValue(true));
  }
  static const c10::FunctionSchema& schema =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::native_batch_norm", "").schema();
  const at::Tensor& input = args[0].toTensor();
  bool training = args[5].toBool();
  auto optional = [&](size_t i) { return args[i].isTensor() ? args[i].toTensor() : at::Tensor(); };
  at::Tensor running_mean = optional(3), running_var = optional(4);
  TORCH_CHECK(training || (running_mean.defined() && running_var.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  TORCH_CHECK(input.dim() >= 2, "batch_norm: expected at least 2D input (got ", input.dim(),
              "D input)");
  c10::Device device = common_device({&input});
  c10::DeviceGuard guard(device);
  at::ScalarType stat = at::toOpMathType(input.scalar_type());
  int64_t channels = input.size(1);
  at::Tensor out =
      at::empty(input.sizes(), input.options().memory_format(input.suggest_memory_format()));
  at::Tensor mean = at::empty({training ? channels : 0}, input.options().dtype(stat));
  at::Tensor invstd = at::empty({training ? channels : 0}, input.options().dtype(stat));
  std::vector<at::Tensor> outputs{out, mean, invstd};
  if (training && running_mean.defined() && running_var.defined()) {
    outputs.push_back(running_mean);
    outputs.push_back(running_var);
  }
  if (input.numel() > 0) run_rule("batch_norm", schema, args, outputs, device);
  stack->push_back(out);
  stack->push_back(mean);
  stack->push_back(invstd);
  if (with_update) stack->push_back(at::empty({0}, input.options().dtype(at::kByte)));
}

}  // namespace torchtpu::aten
