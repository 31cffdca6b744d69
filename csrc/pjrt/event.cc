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

void Event::on_ready(std::function<void(bool ok)> callback) const {
  struct Pending {
    std::shared_ptr<const Plugin> plugin;
    std::function<void(bool)> callback;
  };
  auto* pending = new Pending{plugin_, std::move(callback)};
  TORCHTPU_PJRT_ARGS(PJRT_Event_OnReady_Args, args);
  args.event = event_;
  args.user_arg = pending;
  args.callback = [](PJRT_Error* error, void* user_arg) {
    std::unique_ptr<Pending> p(static_cast<Pending*>(user_arg));
    if (error != nullptr) {
      TORCHTPU_PJRT_ARGS(PJRT_Error_Destroy_Args, destroy);
      destroy.error = error;
      p->plugin->api()->PJRT_Error_Destroy(&destroy);
    }
    p->callback(error == nullptr);
  };
  try {
    TORCHTPU_PJRT_CALL(*plugin_, PJRT_Event_OnReady, &args);
  } catch (...) {
    delete pending;  // not registered: the callback will never run
    throw;
  }
}

}  // namespace torchtpu::pjrt
