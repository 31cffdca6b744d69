// What the device did, for the profiler: while a profiling session is on, the engine records
// named intervals here (each program's execution, from its launch to PJRT's completion event;
// compiles; host<->device copies; DeferAndFuse flushes), tagged with the profiled op and the
// record_function range innermost on the recording thread. csrc/aten/TpuProfiler.cc turns them
// into the PyTorch profiler's events. While no session is on, each hook costs one relaxed atomic
// load.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace torchtpu::pjrt {
class Buffer;
class Event;
}

namespace torchtpu::engine::trace {

enum class Kind : uint8_t {
  kExecute,       // device: a program, from its launch to its completion
  kCopyToDevice,  // device: host -> device
  kCopyToHost,    // device: device -> host
  kCompile,       // host: a cache miss, compiled (or loaded from the disk cache)
  kFlush,         // host: DeferAndFuse running its pending program
};

bool on_device(Kind kind);

struct Interval {
  Kind kind = Kind::kExecute;
  std::string name;       // empty for an op's own program: the profiler names it after the op
  int device = 0;
  int32_t thread = 0;     // the recording thread's system id
  int64_t start_ns = 0;   // system clock, ns since the epoch
  int64_t end_ns = 0;     // 0: not finished
  uint64_t correlation = 0;             // the innermost profiled op (0: none)
  std::vector<uint64_t> user_ranges;    // the record_function ranges around it, outermost first
  int64_t amount = 0;     // bytes of a copy, nodes of a flushed program
};

namespace detail {
extern std::atomic<bool> active;
}

inline bool enabled() { return detail::active.load(std::memory_order_relaxed); }
int64_t now_ns();

// A session: start() forgets what was recorded and turns recording on; stop() turns it off,
// waits (up to `wait`) for the executions still running to complete and returns the intervals.
void start();
std::vector<Interval> stop(std::chrono::milliseconds wait = std::chrono::milliseconds(2000));

// The profiler's op and record_function ranges, entered and left on the thread that runs them.
void push_correlation(uint64_t id, bool user);
void pop_correlation(bool user);

// A range from construction to destruction, recorded if profiling was on at its start.
class Range {
 public:
  Range(Kind kind, int device, int64_t amount = 0);
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;
  ~Range();
  void rename(std::string name) { name_ = std::move(name); }

 private:
  Kind kind_;
  int device_;
  int64_t amount_;
  int64_t start_ = 0;  // 0: off
  std::string name_;
};

// The bytes of an array of `dims` with elements of `element_bytes`.
int64_t bytes(size_t element_bytes, const std::vector<int64_t>& dims);

// buffer.to_host(dst, size), recorded as a copy to the host. While profiling, it first waits for
// the computation producing the buffer, so that wait does not count as the copy.
void to_host(const pjrt::Buffer& buffer, void* dst, size_t size, int device);

// 0 while profiling is off, else now: the launch time to give launched().
inline int64_t launch_time() { return enabled() ? now_ns() : 0; }
// A program launched at `launch_ns` on `device`; its execution ends when `done` is ready (null:
// it was waited for already). Does nothing for launch_ns 0.
void launched(int64_t launch_ns, int device, const pjrt::Event* done);

}  // namespace torchtpu::engine::trace
