// GradScaler's kernels: _amp_foreach_non_finite_check_and_unscale_ and _amp_update_scale_ mutate
// arguments they do not return, so the generic kernel cannot serve them; these check the
// arguments with PyTorch's messages and record the lowering rules (csrc/lowering/amp.cc), which
// write every mutated argument. Nothing waits for the device.
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "aten/ops.h"
#include "aten/tensor_view.h"

namespace torchtpu::aten {
namespace {

void check_one_element(const at::Tensor& t, const char* name, at::ScalarType dtype,
                       const char* kind) {
  TORCH_CHECK(t.numel() == 1, name, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == dtype, name, " must be a", kind, " tensor.");
}

// (self: grads, found_inf, inv_scale) -> ()
void non_finite_check_and_unscale_kernel(const c10::OperatorHandle& op,
                                         torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = take_arguments(op, stack);
  std::vector<at::Tensor> grads = args[0].toTensorVector();
  const at::Tensor& found_inf = args[1].toTensor();
  const at::Tensor& inv_scale = args[2].toTensor();
  check_one_element(inv_scale, "inv_scale", at::kFloat, " float");
  check_one_element(found_inf, "found_inf", at::kFloat, " float");
  if (grads.empty()) return;
  std::vector<const at::Tensor*> all{&found_inf, &inv_scale};
  for (const at::Tensor& g : grads) {
    TORCH_CHECK(at::isFloatingType(g.scalar_type()),
                "_amp_foreach_non_finite_check_and_unscale_: scaled_grads must be floating-point "
                "tensors, got ", g.scalar_type());
    all.push_back(&g);
  }
  c10::Device device = common_device_of(all);
  c10::DeviceGuard guard(device);
  std::vector<at::Tensor> outputs = grads;
  outputs.push_back(found_inf);
  run_rule("amp_non_finite_check_and_unscale", op.schema(), args, outputs, device);
}

// (self: scale, growth_tracker, found_inf, scale_growth_factor, scale_backoff_factor,
//  growth_interval) -> self
void update_scale_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::vector<c10::IValue> args = take_arguments(op, stack);
  const at::Tensor& scale = args[0].toTensor();
  const at::Tensor& tracker = args[1].toTensor();
  const at::Tensor& found_inf = args[2].toTensor();
  check_one_element(scale, "current_scale", at::kFloat, " float");
  check_one_element(tracker, "growth_tracker", at::kInt, "n int");
  check_one_element(found_inf, "found_inf", at::kFloat, " float");
  c10::Device device = common_device({&scale, &tracker, &found_inf});
  c10::DeviceGuard guard(device);
  run_rule("amp_update_scale", op.schema(), args, {scale, tracker}, device);
  stack->push_back(scale);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_",
         torch::CppFunction::makeFromBoxedFunction<&non_finite_check_and_unscale_kernel>());
  m.impl("_amp_update_scale_", torch::CppFunction::makeFromBoxedFunction<&update_scale_kernel>());
}

}  // namespace
}  // namespace torchtpu::aten
