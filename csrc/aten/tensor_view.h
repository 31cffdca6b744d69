// Translating at::Tensor arguments into engine terms: element types, views, scalars.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <vector>

#include "engine/program.h"

namespace torchtpu::aten {

// The XLA element type of a PyTorch dtype; raises TypeError for dtypes XLA and torch do not share.
hlo::ElementType element_type(c10::ScalarType dtype);
// The tensor's storage, sizes, strides and offset, in its own dtype.
engine::TensorView view_of(const at::Tensor& t);
// `value` converted to `dtype`: its element type and bits (zero past its width).
struct ScalarBits {
  hlo::ElementType type;
  uint64_t bits[2] = {0, 0};
};
ScalarBits scalar_bits(const c10::Scalar& value, c10::ScalarType dtype);
// Adds `value` converted to `dtype` to the program as a cached 0-d argument.
int scalar_argument(engine::Program& p, const c10::Scalar& value, c10::ScalarType dtype);
// A CPU 0-d tensor (a wrapped Python number or a 0-d CPU tensor) may join a tpu op as a scalar.
bool is_cpu_scalar(const at::Tensor& t);
// Reads a tpu tensor, or a CPU scalar as a 0-d argument of `dtype`.
int read_operand(engine::Program& p, const at::Tensor& t, c10::ScalarType dtype);
// The tpu device of an op's tensors; raises PyTorch's "Expected all tensors to be on the same
// device" error when they are on different devices (CPU scalars excepted).
c10::Device common_device(std::initializer_list<const at::Tensor*> tensors);
c10::Device common_device_of(const std::vector<const at::Tensor*>& tensors);
// The defined tensors an op argument holds (one, a list, or none).
std::vector<at::Tensor> tensors_of(const c10::IValue& v);
// The op argument with `f` applied to each tensor it holds (Tensor, Tensor[], Tensor?[]).
c10::IValue map_tensors(const c10::IValue& v, const std::function<at::Tensor(const at::Tensor&)>& f);

}  // namespace torchtpu::aten
