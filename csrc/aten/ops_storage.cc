// Factories and storage: empty tensors, resize_ and set_. Allocation is metadata only; a storage
// gets device memory when something is first written into it.
#include <ATen/EmptyTensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/tril_indices.h>
#include <ATen/ops/triu_indices.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>

#include "aten/TpuAllocator.h"
#include "aten/TpuGuard.h"
#include "aten/ops.h"
#include "aten/tensor_view.h"

namespace torchtpu::aten {
namespace {

constexpr c10::DispatchKeySet kTpuKeys{c10::DispatchKey::PrivateUse1};

int device_index(std::optional<at::Device> device) {
  int index = device && device->has_index() ? device->index() : current_device();
  check_device_index(index);
  return index;
}

// Sets sizes (and strides, when given) and grows the storage to hold them.
void resize_impl(const at::Tensor& self, at::IntArrayRef size,
                 std::optional<at::IntArrayRef> stride) {
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  size_t itemsize = self.dtype().itemsize();
  size_t nbytes;
  if (stride) {
    impl->set_sizes_and_strides(size, *stride);
    nbytes = at::detail::computeStorageNbytes(size, *stride, itemsize, self.storage_offset());
  } else {
    impl->set_sizes_contiguous(size);
    nbytes = at::detail::computeStorageNbytesContiguous(size, itemsize, self.storage_offset());
  }
  if (nbytes > self.storage().nbytes()) resize_storage(self.storage(), nbytes);
}

}  // namespace

namespace {

// The checks of a tpu factory: the dtype to allocate.
at::ScalarType factory_dtype(std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                             std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "torchtpu: only strided tensors are supported on tpu, not ", *layout);
  at::ScalarType type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  element_type(type);
  return type;
}

at::Device tpu(std::optional<at::Device> device) {
  return at::Device(c10::DeviceType::PrivateUse1,
                    static_cast<c10::DeviceIndex>(device_index(device)));
}

}  // namespace

at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                 std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  at::ScalarType type = factory_dtype(dtype, layout, pin_memory);
  c10::DeviceGuard guard(tpu(device));
  return at::detail::empty_generic(size, tpu_allocator(), kTpuKeys, type, memory_format);
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory) {
  at::ScalarType type = factory_dtype(dtype, layout, pin_memory);
  c10::DeviceGuard guard(tpu(device));
  return at::detail::empty_strided_generic(size, stride, tpu_allocator(), kTpuKeys, type);
}

// Autograd's stand-in for a gradient that is known to be zero. A plain zero tensor is the same
// value; PyTorch's ZeroTensor key, which would skip the arithmetic on it, is a CPU/CUDA saving.
at::Tensor efficient_zero_tensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout> layout,
                                 std::optional<at::Device> device,
                                 std::optional<bool> pin_memory) {
  at::ScalarType type = factory_dtype(dtype, layout, pin_memory);
  return at::zeros(size, at::TensorOptions().dtype(type).device(tpu(device)));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  for (int64_t s : size) TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  if (self.sizes() != size) resize_impl(self, size, std::nullopt);
  if (memory_format) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve,
                "Unsupported memory format", *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t storage_offset,
                        at::IntArrayRef size, at::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), storage_offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(storage_offset);
  std::optional<at::IntArrayRef> strides;
  if (stride.data() != nullptr) strides = stride;
  resize_impl(self, size, strides);
  return self;
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0,
                       allocate_on(self.device().index(), 0), tpu_allocator(), true);
  self.unsafeGetTensorImpl()->set_storage_keep_dtype(std::move(storage));
  self.unsafeGetTensorImpl()->set_storage_offset(0);
  self.unsafeGetTensorImpl()->set_sizes_contiguous({0});
  return self;
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  // c10 counts only its own dense backends (CPU, CUDA, ...) as sharing one TensorImpl layout;
  // a dense tpu tensor has that layout too. This is what lets `param.data = t` and Module.to move a
  // Parameter across devices in place, so parameters tied to one another stay one object.
  auto dense_cpu_or_tpu = [](const at::Tensor& t) {
    c10::DispatchKeySet keys = t.key_set();
    return keys.has(c10::DispatchKey::Dense) &&
           (t.device().type() == c10::DeviceType::CPU ||
            t.device().type() == c10::DeviceType::PrivateUse1);
  };
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set()) ||
         (dense_cpu_or_tpu(self) && dense_cpu_or_tpu(from));
}

// tril_indices / triu_indices are functions of three integers: the host computes them and one
// upload brings them to the device.
namespace {
template <at::Tensor (*host)(int64_t, int64_t, int64_t, at::TensorOptions)>
at::Tensor triangle_indices(int64_t row, int64_t col, int64_t offset,
                            std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                            std::optional<at::Device> device, std::optional<bool> pin_memory) {
  factory_dtype(dtype, layout, pin_memory);
  return host(row, col, offset, at::TensorOptions().dtype(dtype.value_or(at::kLong)))
      .to(tpu(device));
}
}  // namespace

at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                        std::optional<at::Device> device, std::optional<bool> pin_memory) {
  return triangle_indices<&at::tril_indices>(row, col, offset, dtype, layout, device, pin_memory);
}

at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                        std::optional<at::Device> device, std::optional<bool> pin_memory) {
  return triangle_indices<&at::triu_indices>(row, col, offset, dtype, layout, device, pin_memory);
}

}  // namespace torchtpu::aten
