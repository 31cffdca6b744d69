#include "aten/TpuEvent.h"

#include <c10/util/Exception.h>

#include "aten/TpuStream.h"
#include "engine/eager.h"
#include "engine/runtime.h"

namespace torchtpu::aten {
namespace {

struct TpuEvent {
  std::shared_ptr<engine::LaunchMark> mark;
};

TpuEvent* as_event(void* event) { return static_cast<TpuEvent*>(event); }

}  // namespace

void record_event(void** event, const c10::Stream& stream, c10::DeviceIndex event_device,
                  c10::EventFlag) {
  check_stream(stream);
  TORCH_CHECK(event_device == -1 || event_device == stream.device_index(), "Event device index ",
              static_cast<int>(event_device), " does not match recording stream's device index ",
              static_cast<int>(stream.device_index()), ".");
  int device = stream.device_index();
  engine::EngineWork work;
  engine::flush(device);  // deferred work is part of "the launches so far"
  std::shared_ptr<engine::LaunchMark> mark = engine::Runtime::get().mark(device);
  if (*event == nullptr) *event = new TpuEvent();
  as_event(*event)->mark = std::move(mark);
}

void block_on_event(void* event, const c10::Stream& stream) {
  check_stream(stream);
  (void)event;  // cross-device waits, too, are ordered by the buffers moved between devices
}

bool query_event(void* event) {
  if (event == nullptr || !as_event(event)->mark) return true;
  return as_event(event)->mark->done();
}

void synchronize_event(void* event) {
  if (event == nullptr || !as_event(event)->mark) return;
  engine::EngineWork work;
  as_event(event)->mark->wait();
}

double event_elapsed_ms(void* start, void* end) {
  TORCH_CHECK_VALUE(start != nullptr && end != nullptr,
                    "Both events must be recorded before calculating elapsed time.");
  const auto& a = as_event(start)->mark;
  const auto& b = as_event(end)->mark;
  TORCH_CHECK(a->device() == b->device(),
              "torchtpu: elapsed_time between events of tpu:", a->device(),
              " and tpu:", b->device(), "; both must be on one device");
  return a->elapsed_ms(*b);
}

void destroy_event(void* event) noexcept { delete as_event(event); }

}  // namespace torchtpu::aten
