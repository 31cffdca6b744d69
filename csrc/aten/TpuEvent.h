// Events of "tpu": an event records the device's launches so far (pending DeferAndFuse work is
// launched first); it is done once all of them have finished, stamped with the time it became
// done, so elapsed_time measures device time between two events. The DeviceGuardImplInterface
// (TpuGuard.cc) forwards its event calls here.
#pragma once

#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torchtpu::aten {

void record_event(void** event, const c10::Stream& stream, c10::DeviceIndex event_device,
                  c10::EventFlag flag);
// Makes `stream` wait for the event: PJRT orders the device's work by its data, so only the
// devices are checked.
void block_on_event(void* event, const c10::Stream& stream);
bool query_event(void* event);
void synchronize_event(void* event);
double event_elapsed_ms(void* start, void* end);
void destroy_event(void* event) noexcept;

}  // namespace torchtpu::aten
