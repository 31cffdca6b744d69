#include "pjrt/event.h"

#include "pjrt/error.h"

namespace torchtpu::pjrt {
namespace {

struct ReadyCallback {
  std::shared_ptr<const Plugin> plugin;
  std::function<void(const std::string&)> callback;
};

void call_ready_callback(PJRT_Error* error, void* user_arg) {
  std::unique_ptr<ReadyCallback> ready(static_cast<ReadyCallback*>(user_arg));
  std::string message;
  if (error != nullptr) {
    try {
      ready->plugin->check(error, "PJRT_Event_OnReady");  // destroys the error
    } catch (const std::exception& e) {
      message = e.what();
    }
    if (message.empty()) message = "PJRT event failed";
  }
  ready->callback(message);
}

}  // namespace

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

void Event::on_ready(std::function<void(const std::string& error)> callback) const {
  TORCHTPU_PJRT_ARGS(PJRT_Event_OnReady_Args, args);
  args.event = event_;
  args.callback = &call_ready_callback;
  auto ready = std::make_unique<ReadyCallback>(ReadyCallback{plugin_, std::move(callback)});
  args.user_arg = ready.get();
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Event_OnReady, &args);
  ready.release();  // the callback owns it now
}

}  // namespace torchtpu::pjrt
