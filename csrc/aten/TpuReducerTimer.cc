// DDP's reducer times its iterations with a c10d::Timer registered per device type (PyTorch has
// CPU's and CUDA's): this one records tpu events beside the host times, so
// DistributedDataParallel's logging data has device compute and communication times for tpu
// modules instead of a warning that it collects none.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace torchtpu::aten {
namespace {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

class TpuReducerTimer final : public c10d::Timer {
 public:
  explicit TpuReducerTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    c10d::Timer::record(event);  // the host time, which the reducer also reads
    c10::impl::VirtualGuardImpl guard(kTpu);
    event_of(event).record(guard.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    c10::Event& a = event_of(start);
    c10::Event& b = event_of(end);
    if (!a.was_marked_for_recording() || !b.was_marked_for_recording()) return std::nullopt;
    a.synchronize();
    b.synchronize();
    double ms = a.elapsedTime(b);
    if (ms < 0) return std::nullopt;  // the events were recorded out of order this iteration
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  c10::Event& event_of(Event event) { return events_[static_cast<size_t>(event)]; }

  c10::Device device_;
  static c10::Event timed() { return c10::Event(kTpu, c10::EventFlag::BACKEND_DEFAULT); }
  c10::Event events_[5] = {timed(), timed(), timed(), timed(), timed()};  // timing enabled
};

}  // namespace
}  // namespace torchtpu::aten

namespace c10d {  // the registry's macros name it unqualified
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::DeviceType::PrivateUse1,
                         torchtpu::aten::TpuReducerTimer);
}  // namespace c10d
