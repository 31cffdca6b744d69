// The eager modes. Strict runs each op as its own program as soon as it is recorded; Debug also
// waits for it, so an error surfaces at the op that caused it; DeferAndFuse records ops into one
// pending program per device and runs it at a sync point (a read to the host, a mode switch,
// synchronize, a size bound, a repeating step), so a sequence of ops compiles to one fused
// executable whose intermediates that no tensor still references are never materialized.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "engine/exit_gate.h"
#include "engine/program.h"

namespace torchtpu::engine {

enum class EagerMode { kStrict = 0, kDebug = 1, kDeferAndFuse = 2 };

EagerMode eager_mode();
// Flushes every device's pending work first.
void set_eager_mode(EagerMode mode);

// DeferAndFuse runs a pending program once it grows past this many nodes (default 4000).
size_t max_pending_nodes();
void set_max_pending_nodes(size_t nodes);

// Runs the device's pending program, if any.
void flush(int device);
void flush_all();

// Capture, the torch.compile backend's trace-everything mode (csrc/aten/compiled_graph.cc): from
// begin_capture, every op records into the device's pending program as under DeferAndFuse, with
// no size bound. A sync point that needs the work done (a read to the host, a CPU fallback) runs
// it as DeferAndFuse would, so results stay right, and marks the capture broken.
void begin_capture(int device);
bool capturing();
// Whether ops record into the device's pending program (DeferAndFuse or a capture) rather than
// run as programs of their own.
bool deferring();
// Says why the capture is about to break (the first reason given is kept), before the sync point
// that breaks it.
void capture_breaks_because(std::string_view why);
// Ends the capture: the recorded program, not yet run (null when nothing was recorded), or, when
// the capture was broken, null with `broken` set to why (its work has run). Pending work of other
// devices runs.
std::unique_ptr<Program> end_capture(std::string* broken);
// Storages made from this serial on were made during the capture.
uint64_t capture_serial();

// Holds the device's recording lock: no op records on the device meanwhile.
std::unique_lock<std::recursive_mutex> lock_device(int device);

struct DeferStats {
  int64_t flushes = 0;
  int64_t nodes = 0;        // nodes in all flushed programs
  int64_t cache_hits = 0;   // flushed programs whose executable was in the cache
  int64_t cache_misses = 0;
  int64_t repeats = 0;      // flushes because the ops recorded repeated the last flushed program
};
DeferStats defer_stats();

// One op being recorded: into the device's pending program under DeferAndFuse, else into a
// program of its own. Holds the device's lock while it lives; is engine work (exit_gate.h) for
// a little longer, on both sides of the lock.
class Recording {
 public:
  explicit Recording(int device);
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  ~Recording();

  Program& program() { return *program_; }
  // Strict: runs the op; Debug: runs it and waits; DeferAndFuse: runs the pending program only
  // once it has grown past the size bound. With `launch` (Strict and Debug), also says what the
  // op's program bound and wrote, to keep it as an OpReplay.
  void finish(Launch* launch = nullptr);

 private:
  EngineWork work_;  // first in, last out: no lock is held where it may wait
  std::unique_lock<std::recursive_mutex> lock_;
  std::unique_ptr<Program> own_;
  Program* program_;
  int device_;
};

// Strict and Debug: runs an op again as its kept program (OpReplay) on `storages`, which lie as
// those it was made from did, and `scalars`, its scalar arguments' buffers in order: what a
// Recording of the op would do, without recording it. Debug waits for it.
void replay(int device, const OpReplay& op, const std::vector<StorageHandle*>& storages,
            const std::vector<std::shared_ptr<pjrt::Buffer>>& scalars);
// Ops run by replay() so far in this process (a metric).
uint64_t op_replays();

}  // namespace torchtpu::engine
