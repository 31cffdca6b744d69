// An owned PJRT_Event.
#pragma once

#include <functional>
#include <memory>
#include <string>

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
  // Calls `callback` once the event is ready (at once if it is), with its error message, empty
  // when it succeeded. It runs on whichever thread readies the event (a plugin thread): it must
  // not block or take the GIL.
  void on_ready(std::function<void(const std::string& error)> callback) const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_Event* event_;
};

}  // namespace torchtpu::pjrt
