#include "engine/launch_marks.h"

namespace torchtpu::engine {

bool LaunchMark::done() const {
  std::lock_guard<std::mutex> lock(owner_->mutex_);
  return done_;
}

void LaunchMark::wait() const {
  std::unique_lock<std::mutex> lock(owner_->mutex_);
  owner_->changed_.wait(lock, [this] { return done_; });
}

double LaunchMark::elapsed_ms(const LaunchMark& later) const {
  std::lock_guard<std::mutex> lock(owner_->mutex_);
  return std::chrono::duration<double, std::milli>(later.done_at_ - done_at_).count();
}

uint64_t LaunchMarks::start(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++devices_.at(device).started;
}

void LaunchMarks::finished(int device, uint64_t serial) {
  std::lock_guard<std::mutex> lock(mutex_);
  Device& d = devices_.at(device);
  if (serial <= d.frontier) return;  // synchronize got there first
  d.ahead.insert(serial);
  advance(d);
}

void LaunchMarks::finished_through(int device, uint64_t serial) {
  std::lock_guard<std::mutex> lock(mutex_);
  Device& d = devices_.at(device);
  if (serial <= d.frontier) return;
  d.frontier = serial;
  d.ahead.erase(d.ahead.begin(), d.ahead.upper_bound(serial));
  advance(d);
}

uint64_t LaunchMarks::last_started(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return devices_.at(device).started;
}

std::shared_ptr<LaunchMark> LaunchMarks::mark(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  Device& d = devices_.at(device);
  std::shared_ptr<LaunchMark> m(new LaunchMark(this, device, d.started));
  if (d.frontier >= m->serial_) {
    m->done_ = true;  // nothing running: done as it is recorded, as on an idle CUDA stream
    m->done_at_ = std::chrono::steady_clock::now();
  } else {
    d.waiting.push_back(m);
  }
  return m;
}

void LaunchMarks::advance(Device& d) {
  while (!d.ahead.empty() && *d.ahead.begin() == d.frontier + 1) {
    d.frontier = *d.ahead.begin();
    d.ahead.erase(d.ahead.begin());
  }
  if (d.waiting.empty() || d.waiting.front()->serial_ > d.frontier) return;
  auto now = std::chrono::steady_clock::now();
  while (!d.waiting.empty() && d.waiting.front()->serial_ <= d.frontier) {
    d.waiting.front()->done_ = true;
    d.waiting.front()->done_at_ = now;
    d.waiting.pop_front();
  }
  changed_.notify_all();
}

}  // namespace torchtpu::engine
