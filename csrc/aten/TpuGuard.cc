#include "aten/TpuGuard.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "aten/TpuEvent.h"
#include "aten/TpuStream.h"
#include "engine/eager.h"
#include "engine/runtime.h"

namespace torchtpu::aten {
namespace {

thread_local int current_index = 0;

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

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
  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d.index()); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
    return new_stream(d.index(), high_priority ? kHighestStreamPriority : kLowestStreamPriority);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return new_stream(d.index(), priority);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return exchange_stream(s); }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(engine::Runtime::device_count_or_zero());
  }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    record_event(event, stream, device_index, flag);
  }
  void block(void* event, const c10::Stream& stream) const override {
    block_on_event(event, stream);
  }
  bool queryEvent(void* event) const override { return query_event(event); }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    destroy_event(event);
  }
  void synchronizeEvent(void* event) const override { synchronize_event(event); }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    return event_elapsed_ms(start, end);
  }
  // One queue per device: a stream's work is done when the device's is.
  bool queryStream(const c10::Stream& stream) const override {
    check_stream(stream);
    engine::EngineWork work;
    engine::flush(stream.device_index());
    return engine::Runtime::get().mark(stream.device_index())->done();
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    check_stream(stream);
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
