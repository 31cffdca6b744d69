// The "tpu" DeviceGuardImplInterface: the current device; its streams and events live in
// TpuStream.h and TpuEvent.h.
#pragma once

#include <c10/core/Device.h>

namespace torchtpu::aten {

int current_device();
void set_current_device(int device);
// Raises PyTorch's error for an index outside [0, device_count).
void check_device_index(int device);

}  // namespace torchtpu::aten
