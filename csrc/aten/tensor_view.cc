#include "aten/tensor_view.h"

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "aten/TpuAllocator.h"

namespace torchtpu::aten {

using hlo::ElementType;

hlo::ElementType element_type(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Bool: return ElementType::kPred;
    case c10::ScalarType::Byte: return ElementType::kU8;
    case c10::ScalarType::Char: return ElementType::kS8;
    case c10::ScalarType::Short: return ElementType::kS16;
    case c10::ScalarType::Int: return ElementType::kS32;
    case c10::ScalarType::Long: return ElementType::kS64;
    case c10::ScalarType::UInt16: return ElementType::kU16;
    case c10::ScalarType::UInt32: return ElementType::kU32;
    case c10::ScalarType::UInt64: return ElementType::kU64;
    case c10::ScalarType::Half: return ElementType::kF16;
    case c10::ScalarType::Float: return ElementType::kF32;
    case c10::ScalarType::Double: return ElementType::kF64;
    case c10::ScalarType::BFloat16: return ElementType::kBF16;
    case c10::ScalarType::ComplexFloat: return ElementType::kC64;
    case c10::ScalarType::ComplexDouble: return ElementType::kC128;
    default: break;
  }
  TORCH_CHECK_TYPE(false, "torchtpu: the tpu device does not support dtype ", dtype,
                   "; supported are bool, uint8/16/32/64, int8/16/32/64, float16, bfloat16, "
                   "float32, float64, complex64 and complex128");
}

engine::TensorView view_of(const at::Tensor& t) {
  engine::TensorView v;
  v.storage = &storage_handle(t.storage());
  v.type = element_type(t.scalar_type());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  v.offset = t.storage_offset();
  return v;
}

namespace {

template <typename T>
ScalarBits bits_of(ElementType type, T value) {
  static_assert(sizeof(T) <= sizeof(ScalarBits::bits));
  ScalarBits b{type};
  std::memcpy(b.bits, &value, sizeof(T));
  return b;
}

}  // namespace

ScalarBits scalar_bits(const c10::Scalar& value, c10::ScalarType dtype) {
  ElementType type = element_type(dtype);
  switch (dtype) {
    case c10::ScalarType::Bool: return bits_of(type, value.to<bool>());
    case c10::ScalarType::Byte: return bits_of(type, value.to<uint8_t>());
    case c10::ScalarType::Char: return bits_of(type, value.to<int8_t>());
    case c10::ScalarType::Short: return bits_of(type, value.to<int16_t>());
    case c10::ScalarType::Int: return bits_of(type, value.to<int32_t>());
    case c10::ScalarType::Long: return bits_of(type, value.to<int64_t>());
    case c10::ScalarType::UInt16: return bits_of(type, value.to<uint16_t>());
    case c10::ScalarType::UInt32: return bits_of(type, value.to<uint32_t>());
    case c10::ScalarType::UInt64: return bits_of(type, value.to<uint64_t>());
    case c10::ScalarType::Half: return bits_of(type, value.to<c10::Half>());
    case c10::ScalarType::BFloat16: return bits_of(type, value.to<c10::BFloat16>());
    case c10::ScalarType::Float: return bits_of(type, value.to<float>());
    case c10::ScalarType::Double: return bits_of(type, value.to<double>());
    case c10::ScalarType::ComplexFloat: return bits_of(type, value.to<c10::complex<float>>());
    case c10::ScalarType::ComplexDouble: return bits_of(type, value.to<c10::complex<double>>());
    default: break;  // element_type raised
  }
  return ScalarBits{type};
}

int scalar_argument(engine::Program& p, const c10::Scalar& value, c10::ScalarType dtype) {
  ScalarBits b = scalar_bits(value, dtype);
  return p.scalar(b.type, b.bits);
}

bool is_cpu_scalar(const at::Tensor& t) { return t.device().is_cpu() && t.dim() == 0; }

int read_operand(engine::Program& p, const at::Tensor& t, c10::ScalarType dtype) {
  if (is_cpu_scalar(t)) return scalar_argument(p, t.item(), dtype);
  return p.read(view_of(t));
}

c10::Device common_device(std::initializer_list<const at::Tensor*> tensors) {
  return common_device_of(std::vector<const at::Tensor*>(tensors));
}

c10::Device common_device_of(const std::vector<const at::Tensor*>& tensors) {
  std::optional<c10::Device> device;
  for (const at::Tensor* t : tensors) {
    if (t == nullptr || !t->defined() || is_cpu_scalar(*t)) continue;
    if (!device) {
      device = t->device();
      continue;
    }
    TORCH_CHECK(t->device() == *device,
                "Expected all tensors to be on the same device, but found at least two devices, ",
                *device, " and ", t->device(), "!");
  }
  TORCH_CHECK(device && device->is_privateuseone(),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              device ? device->str() : std::string("cpu"), " and tpu!");
  return *device;
}

c10::IValue map_tensors(const c10::IValue& v,
                        const std::function<at::Tensor(const at::Tensor&)>& f) {
  if (v.isTensor()) return f(v.toTensor());
  if (v.isTensorList()) {
    std::vector<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorVector()) list.push_back(f(t));
    return list;
  }
  if (v.isList() && v.toListRef().size() > 0 && !v.isIntList() && !v.isDoubleList() &&
      !v.isBoolList()) {  // Tensor?[]
    c10::List<std::optional<at::Tensor>> list;
    for (const c10::IValue& e : v.toListRef()) {
      list.push_back(e.isTensor() ? std::optional<at::Tensor>(f(e.toTensor())) : std::nullopt);
    }
    return list;
  }
  return v;
}

std::vector<at::Tensor> tensors_of(const c10::IValue& v) {
  std::vector<at::Tensor> out;
  if (v.isTensor()) {
    if (v.toTensor().defined()) out.push_back(v.toTensor());
  } else if (v.isTensorList()) {
    out = v.toTensorVector();
  } else if (v.isList()) {
    for (const c10::IValue& e : v.toListRef()) {
      if (e.isTensor() && e.toTensor().defined()) out.push_back(e.toTensor());
    }
  }
  return out;
}

}  // namespace torchtpu::aten
