// Streams of "tpu". PJRT gives one queue per device, which orders the device's work by its data
// dependencies, so a stream is a name for a share of that queue: distinct ids per device, a
// priority, and a current stream per thread and device, as CUDA's streams have. Work on two
// streams is therefore always ordered as wait_stream would order it.
#pragma once

#include <c10/core/Stream.h>

namespace torchtpu::aten {

// Priorities: 0 (default) and -1 (high), as torch.cuda.Stream's lower-is-higher numbers.
constexpr int kLowestStreamPriority = 0;
constexpr int kHighestStreamPriority = -1;

c10::Stream default_stream(c10::DeviceIndex device);  // -1: the current device
c10::Stream current_stream(c10::DeviceIndex device);
c10::Stream new_stream(c10::DeviceIndex device, int priority);
// Makes `stream` current on its device for this thread; returns the one it replaces.
c10::Stream exchange_stream(const c10::Stream& stream);
int stream_priority(const c10::Stream& stream);
// Raises PyTorch's errors for a stream that is not a tpu stream this process made.
void check_stream(const c10::Stream& stream);

}  // namespace torchtpu::aten
