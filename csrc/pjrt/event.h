// An owned PJRT_Event.
#pragma once

#include <functional>
#include <memory>

#include "pjrt/plugin.h"

namespace torchtpu::pjrt {

class Event {
 public:
  Event(std::shared_ptr<const Plugin> plugin, PJRT_Event* event)
      : plugin_(std::move(plugin)), event_(event) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  // Blocks until the event is ready; throws the error it carries, if any.
  void await() const;
  bool is_ready() const;
  // Calls `callback` once the event is ready, on a thread of the plugin's (or at once, on this
  // one, when it already is); `ok` says whether it carries no error. The callback must not block.
  void on_ready(std::function<void(bool ok)> callback) const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_Event* event_;
};

}  // namespace torchtpu::pjrt
