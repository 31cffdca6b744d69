#include "aten/TpuStream.h"

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <atomic>
#include <vector>

#include "aten/TpuGuard.h"

namespace torchtpu::aten {
namespace {

constexpr c10::DeviceType kTpu = c10::DeviceType::PrivateUse1;

// A stream id is serial * 2 + (1 for high priority); the default stream is serial 0.
std::atomic<c10::StreamId> last_serial{0};

thread_local std::vector<c10::StreamId> current_ids;  // per device; missing: the default

c10::DeviceIndex resolve(c10::DeviceIndex device) {
  if (device < 0) return static_cast<c10::DeviceIndex>(current_device());
  check_device_index(device);
  return device;
}

// Tensor.record_stream: PJRT keeps a buffer alive while a launch uses it, so nothing need be
// recorded; the stream is checked as CUDA checks it.
void record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kTpu,
              "record_stream: expected a tpu stream for a tpu tensor, but got a stream on ",
              stream.device());
  check_stream(stream);
  (void)self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", TORCH_FN(record_stream)); }

}  // namespace

c10::Stream default_stream(c10::DeviceIndex device) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTpu, resolve(device)), 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  device = resolve(device);
  c10::StreamId id = static_cast<size_t>(device) < current_ids.size() ? current_ids[device] : 0;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTpu, device), id);
}

c10::Stream new_stream(c10::DeviceIndex device, int priority) {
  c10::StreamId serial = ++last_serial;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kTpu, resolve(device)),
                     serial * 2 + (priority < 0 ? 1 : 0));
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  check_stream(stream);
  c10::Stream previous = current_stream(stream.device_index());
  auto device = static_cast<size_t>(stream.device_index());
  if (current_ids.size() <= device) current_ids.resize(device + 1, 0);
  current_ids[device] = stream.id();
  return previous;
}

int stream_priority(const c10::Stream& stream) {
  return (stream.id() & 1) != 0 ? kHighestStreamPriority : kLowestStreamPriority;
}

void check_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kTpu, "torchtpu: expected a tpu stream, but got a stream on ",
              stream.device());
  TORCH_CHECK(stream.device_index() >= 0, "torchtpu: a tpu stream needs a device index");
  check_device_index(stream.device_index());
  TORCH_CHECK(stream.id() >= 0 && stream.id() / 2 <= last_serial.load(),
              "torchtpu: invalid tpu stream id ", stream.id(), ": no such stream was created");
}

}  // namespace torchtpu::aten
