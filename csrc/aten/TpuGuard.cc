#include "aten/TpuGuard.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "engine/eager.h"
#include "engine/runtime.h"

namespace torchtpu::aten {
namespace {

thread_local int current_index = 0;

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

// One stream per device: PJRT orders a device's work itself. Events record the point to wait
// for as "everything launched so far on that device".
struct TpuEvent {
  int device;
};

class TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
 public:
  c10::DeviceType type() const override { return kTpu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != old.index()) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kTpu, static_cast<c10::DeviceIndex>(current_index));
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kTpu, "torchtpu: expected a tpu device but got ", d);
    if (d.index() >= 0) {
      check_device_index(d.index());
      current_index = d.index();
    }
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) current_index = d.index();
  }
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(engine::Runtime::device_count_or_zero());
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    int device = device_index >= 0 ? device_index : stream.device_index();
    if (*event == nullptr) *event = new TpuEvent{device};
    static_cast<TpuEvent*>(*event)->device = device;
  }
  void block(void*, const c10::Stream&) const override {}  // one stream: already ordered
  bool queryEvent(void* event) const override {
    if (event == nullptr) return true;
    synchronizeEvent(event);
    return true;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  void synchronizeEvent(void* event) const override {
    if (event != nullptr) synchronizeDevice(static_cast<TpuEvent*>(event)->device);
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& stream) const override {
    synchronizeDevice(stream.device_index());
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    if (!engine::Runtime::started()) return;
    int device = device_index >= 0 ? device_index : current_index;
    engine::flush(device);
    engine::Runtime::get().synchronize(device);
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace

int current_device() { return current_index; }

void set_current_device(int device) {
  check_device_index(device);
  current_index = device;
}

void check_device_index(int device) {
  int count = engine::Runtime::get().device_count();
  TORCH_CHECK(device >= 0 && device < count, "torchtpu: invalid device index ", device,
              ": there ", count == 1 ? "is 1 tpu device" : "are " + std::to_string(count) +
              " tpu devices", " (set TORCHTPU_NUM_DEVICES for more on the CPU plugin)");
}

}  // namespace torchtpu::aten
