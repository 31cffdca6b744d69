#include "pjrt/event.h"

namespace torchtpu::pjrt {

Event::~Event() {
  TORCHTPU_PJRT_ARGS(PJRT_Event_Destroy_Args, args);
  args.event = event_;
  plugin_->api()->PJRT_Event_Destroy(&args);
}

void Event::await() const {
  TORCHTPU_PJRT_ARGS(PJRT_Event_Await_Args, args);
  args.event = event_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Event_Await, &args);
}

bool Event::is_ready() const {
  TORCHTPU_PJRT_ARGS(PJRT_Event_IsReady_Args, args);
  args.event = event_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Event_IsReady, &args);
  return args.is_ready;
}

}  // namespace torchtpu::pjrt
