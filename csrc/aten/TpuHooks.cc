// The "tpu" PrivateUse1HooksInterface: availability, generators, pinned host memory, storage
// resizing. Registering it makes "tpu" the torch.accelerator of a PyTorch build without another
// accelerator.
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "aten/TpuAllocator.h"
#include "aten/TpuGenerator.h"
#include "aten/TpuGuard.h"
#include "aten/TpuHostAllocator.h"
#include "engine/disk_cache.h"
#include "engine/runtime.h"

namespace torchtpu::aten {
namespace {

class TpuHooks final : public at::PrivateUse1HooksInterface {
 public:
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return engine::Runtime::device_count_or_zero() > 0; }
  c10::DeviceIndex deviceCount() const override {
    return static_cast<c10::DeviceIndex>(engine::Runtime::device_count_or_zero());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_current_device(device); }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = getCurrentDevice();
    if (device >= 0) set_current_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override {
    return at::make_generator<TpuGeneratorImpl>(device < 0 ? current_device() : device);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(c10::DeviceType::PrivateUse1, getCurrentDevice());
  }
  bool isPinnedPtr(const void* ptr) const override { return is_pinned(ptr); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return host_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return engine::Runtime::started(); }
  void init() const override { engine::Runtime::get(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t nbytes) const override {
    resize_storage(storage, nbytes);
  }
};

const bool registered = [] {
  at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  engine::DiskCache::set_warning_handler(
      [](const std::string& message) { TORCH_WARN("torchtpu: ", message); });
  return true;
}();

}  // namespace
}  // namespace torchtpu::aten
