// The order in which a device's launches finish, for events. Each launch (an execution, an
// asynchronous copy) gets a serial when it starts; a mark taken now covers every launch started
// so far and is done, with the time it became done, once all of them have finished. Launches may
// finish out of order, so a mark waits for the frontier: the serial up to which all are done.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

namespace torchtpu::engine {

class LaunchMarks;

class LaunchMark {
 public:
  int device() const { return device_; }
  bool done() const;
  void wait() const;  // blocks until done()
  // Milliseconds from this mark's completion to `later`'s; both must be done.
  double elapsed_ms(const LaunchMark& later) const;

 private:
  friend class LaunchMarks;
  LaunchMark(LaunchMarks* owner, int device, uint64_t serial)
      : owner_(owner), device_(device), serial_(serial) {}

  LaunchMarks* owner_;
  int device_;
  uint64_t serial_;  // covers the launches numbered 1..serial_
  // Guarded by the owner's mutex.
  bool done_ = false;
  std::chrono::steady_clock::time_point done_at_;
};

class LaunchMarks {
 public:
  explicit LaunchMarks(int devices) : devices_(devices) {}

  // A new launch on `device`: its serial.
  uint64_t start(int device);
  // The launch finished. Safe on any thread (PJRT's callback threads): takes only this object's
  // mutex, never the GIL.
  void finished(int device, uint64_t serial);
  // Every launch numbered up to `serial` finished (synchronize waited for them).
  void finished_through(int device, uint64_t serial);
  uint64_t last_started(int device);
  // A mark covering the launches started so far on `device`.
  std::shared_ptr<LaunchMark> mark(int device);

 private:
  friend class LaunchMark;
  struct Device {
    uint64_t started = 0;
    uint64_t frontier = 0;                            // every launch up to here finished
    std::set<uint64_t> ahead;                         // finished launches past the frontier
    std::deque<std::shared_ptr<LaunchMark>> waiting;  // by serial
  };
  void advance(Device& d);  // with mutex_ held

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Device> devices_;
};

}  // namespace torchtpu::engine
