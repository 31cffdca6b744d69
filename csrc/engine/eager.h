// The eager modes. Strict runs each op as its own program as soon as it is recorded; Debug also
// waits for it, so an error surfaces at the op that caused it; DeferAndFuse records ops into one
// pending program per device and runs it at a sync point (a read to the host, a mode switch,
// synchronize, a size bound), so a sequence of ops compiles to one fused executable whose
// intermediates that no tensor still references are never materialized.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "engine/program.h"

namespace torchtpu::engine {

enum class EagerMode { kStrict = 0, kDebug = 1, kDeferAndFuse = 2 };

EagerMode eager_mode();
// Flushes every device's pending work first.
void set_eager_mode(EagerMode mode);

// Runs the device's pending program, if any.
void flush(int device);
void flush_all();

struct DeferStats {
  int64_t flushes = 0;
  int64_t nodes = 0;  // nodes in all flushed programs
};
DeferStats defer_stats();

// One op being recorded: into the device's pending program under DeferAndFuse, else into a
// program of its own. Holds the device's lock while it lives.
class Recording {
 public:
  explicit Recording(int device);
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  ~Recording();

  Program& program() { return *program_; }
  // Strict: runs the op; Debug: runs it and waits; DeferAndFuse: runs the pending program only
  // once it has grown past the size bound.
  void finish();

 private:
  std::unique_lock<std::recursive_mutex> lock_;
  std::unique_ptr<Program> own_;
  Program* program_;
  int device_;
};

}  // namespace torchtpu::engine
