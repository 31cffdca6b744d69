#include "engine/eager.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "engine/runtime.h"
#include "engine/step_period.h"
#include "engine/trace.h"

namespace torchtpu::engine {
namespace {

std::atomic<int> current_mode{static_cast<int>(EagerMode::kDeferAndFuse)};

// Past this many nodes a pending program is run, bounding compile time and memory held
// (TORCHTPU_DEFER_MAX_NODES, read by the Python package).
std::atomic<size_t> max_nodes{4000};

// Shorter programs are not watched for repeats: a few ops that happen to open a longer sequence
// must not cut it.
constexpr size_t kMinRepeatNodes = 64;

struct Pending {
  std::recursive_mutex mutex;
  std::unique_ptr<Program> program;
  // The structure of the last program run, to notice when the ops being recorded repeat it (a
  // training loop's step): that is a sync point too, so each step runs as the same program.
  // last_size is 0 when that program was too short to watch.
  std::string last_fingerprint;
  size_t last_size = 0;
  // The ops recorded since the last sync point, to find the loop's period (in ops) before any
  // program has repeated; once known, the pending program is cut every `period` ops. A period
  // whose cuts twice in a row do not give the program before them is dropped (a longer one is
  // looked for). program_ops/bytes/nodes: the pending program's ops and size after its last op.
  // A period is only looked for once more ops followed the last sync point than came between
  // any two of the few before it: a loop that reads values in its step is cut there, not inside
  // its step (at a repeated layer, say), even where one of its reads comes a few ops after
  // another (nn.TransformerEncoder reads its padding mask's lengths twice, then runs its layers).
  StepPeriod ops;
  size_t period = 0, min_period = 1, mismatches = 0;
  size_t segment_ops = 0;
  std::array<size_t, 4> last_segments{};  // ops between the last sync points, newest first
  size_t program_ops = 0, program_bytes = 0, program_nodes = 0;
  std::string period_fingerprint;  // of the last program cut by the period
  std::thread::id last_thread;     // that recorded the last op
};

// On the CPU plugin a program holding both the forward and the backward of a chain of
// convolutions runs slower than the two apart: XLA's CPU compiler lays the tensors they share
// out with extra copies (a small CNN's training step: 77 copies and 52 transposes against 38 and
// 32, 21-23 ms against 16-17). So there, a pending program holding two convolutions or more is
// cut where another thread starts recording: the autograd engine's thread starting the
// backward pass. (One convolution, an MLP-mixer's patch embedding, does not pay: cut, its step
// took 8 % longer.)
bool cut_at_thread_change(const Pending& p) {
  static const bool cpu = Runtime::get().client().platform_name() == "cpu";
  return cpu && p.program && p.program->convolutions() >= 2 && !capturing() &&
         p.last_thread != std::this_thread::get_id();
}

std::mutex table_mutex;
std::unordered_map<int, std::unique_ptr<Pending>>& table() {
  static auto* t = new std::unordered_map<int, std::unique_ptr<Pending>>();
  return *t;
}

Pending& pending(int device) {
  std::lock_guard<std::mutex> lock(table_mutex);
  auto& slot = table()[device];
  if (!slot) slot = std::make_unique<Pending>();
  return *slot;
}

std::atomic<int64_t> flushes{0}, flushed_nodes{0}, fused_hits{0}, fused_misses{0}, repeats{0};
std::atomic<uint64_t> replays{0};  // ops run again by replay()

std::atomic<int> capture_device{-1};
std::atomic<bool> capture_broken{false};
uint64_t capture_start = 0;
std::mutex reason_mutex;
std::string capture_reason;  // why the capture breaks, if it was said

// Runs the pending program. A sync point (anything but a cut DeferAndFuse makes itself) also
// forgets the ops seen and the period found.
void run_pending(Pending& p, bool sync = true) {
  if (sync) {
    if (p.segment_ops > 0) {
      std::rotate(p.last_segments.rbegin(), p.last_segments.rbegin() + 1,
                  p.last_segments.rend());
      p.last_segments[0] = p.segment_ops;
    }
    p.segment_ops = 0;
    p.ops.clear();
    p.period = 0;
    p.min_period = 1;
    p.mismatches = 0;
  }
  p.program_ops = p.program_bytes = p.program_nodes = 0;
  std::unique_ptr<Program> program = std::move(p.program);
  if (!program) return;
  if (capture_device.load() == program->device()) capture_broken = true;
  ++flushes;
  flushed_nodes += static_cast<int64_t>(program->size());
  p.last_size = program->size() >= kMinRepeatNodes ? program->size() : 0;
  if (p.last_size > 0) p.last_fingerprint = program->fingerprint().bytes();
  trace::Range range(trace::Kind::kFlush, program->device(), static_cast<int64_t>(program->size()));
  program->run();
  ++(program->cache_hit() ? fused_hits : fused_misses);
}

// Called at a cut by the period: the program should be the one the last such cut ran.
void check_period(Pending& p) {
  const std::string& fingerprint = p.program->fingerprint().bytes();
  if (fingerprint == p.period_fingerprint) {
    p.mismatches = 0;
    return;
  }
  p.period_fingerprint = fingerprint;
  if (++p.mismatches > 2) {  // the first cut may follow another kind of program
    p.min_period = p.period + 1;
    p.period = 0;
    p.mismatches = 0;
    p.ops.clear();
  }
}

}  // namespace

size_t max_pending_nodes() { return max_nodes.load(); }

void set_max_pending_nodes(size_t nodes) { max_nodes = nodes > 0 ? nodes : 1; }

EagerMode eager_mode() { return static_cast<EagerMode>(current_mode.load()); }

void set_eager_mode(EagerMode mode) {
  flush_all();
  current_mode = static_cast<int>(mode);
}

void flush(int device) {
  refuse_in_forked_child();  // a flush precedes every read to the host
  EngineWork work;
  Pending& p = pending(device);
  std::lock_guard<std::recursive_mutex> lock(p.mutex);
  run_pending(p);
}

void flush_all() {
  std::vector<int> devices;
  {
    std::lock_guard<std::mutex> lock(table_mutex);
    for (auto& [device, slot] : table()) devices.push_back(device);
  }
  for (int d : devices) flush(d);
}

void begin_capture(int device) {
  flush_all();
  capture_start = next_storage_serial();
  capture_broken = false;
  {
    std::lock_guard<std::mutex> lock(reason_mutex);
    capture_reason.clear();
  }
  capture_device = device;
}

bool capturing() { return capture_device.load() >= 0; }

bool deferring() { return eager_mode() == EagerMode::kDeferAndFuse || capturing(); }

uint64_t capture_serial() { return capture_start; }

void capture_breaks_because(std::string_view why) {
  if (!capturing()) return;
  std::lock_guard<std::mutex> lock(reason_mutex);
  if (capture_reason.empty()) capture_reason = why;
}

std::unique_ptr<Program> end_capture(std::string* broken) {
  int device = capture_device.exchange(-1);
  broken->clear();
  if (capture_broken) {
    std::lock_guard<std::mutex> lock(reason_mutex);
    *broken = capture_reason.empty() ? "an op in it needed the device's results on the host"
                                     : capture_reason;
  }
  std::unique_ptr<Program> program;
  if (device >= 0) {
    Pending& p = pending(device);
    std::lock_guard<std::recursive_mutex> lock(p.mutex);
    if (!broken->empty()) {
      run_pending(p);
    } else {
      program = std::move(p.program);
    }
  }
  flush_all();
  return program;
}

DeferStats defer_stats() {
  return {flushes.load(), flushed_nodes.load(), fused_hits.load(), fused_misses.load(),
          repeats.load()};
}

std::unique_lock<std::recursive_mutex> lock_device(int device) {
  return std::unique_lock<std::recursive_mutex>(pending(device).mutex);
}

void forget_storage(StorageHandle* storage) {
  Pending& p = pending(storage->device());  // a program only touches its own device's storages
  std::lock_guard<std::recursive_mutex> lock(p.mutex);
  if (Program* program = storage->pending()) program->forget(storage);
}

Recording::Recording(int device) : device_(device) {
  refuse_in_forked_child();  // before the lock: the fork may have copied it held
  Pending& p = pending(device);
  lock_ = std::unique_lock<std::recursive_mutex>(p.mutex);
  if (deferring()) {
    if (cut_at_thread_change(p)) run_pending(p);
    p.last_thread = std::this_thread::get_id();
    if (!p.program) p.program = std::make_unique<Program>(device, Program::kDeferred);
    program_ = p.program.get();
  } else {
    run_pending(p);
    own_ = std::make_unique<Program>(device, Program::kDeferred);
    program_ = own_.get();
  }
}

Recording::~Recording() = default;

uint64_t op_replays() { return replays.load(std::memory_order_relaxed); }

void replay(int device, const OpReplay& op, const std::vector<StorageHandle*>& storages,
            const std::vector<std::shared_ptr<pjrt::Buffer>>& scalars) {
  EngineWork work;
  refuse_in_forked_child();
  Pending& p = pending(device);
  std::lock_guard<std::recursive_mutex> lock(p.mutex);
  run_pending(p);
  std::vector<PJRT_Buffer*> args;
  // The storages' own references, so a buffer nothing else holds counts one holder.
  std::vector<const std::shared_ptr<pjrt::Buffer>*> buffers;
  args.reserve(op.arguments.size());
  buffers.reserve(op.arguments.size());
  size_t scalar = 0;
  for (int k : op.arguments) {
    const std::shared_ptr<pjrt::Buffer>& buffer =
        k >= 0 ? storages[k]->buffer() : scalars.at(scalar++);
    if (!buffer) throw std::logic_error("torchtpu: a kept op's argument has no buffer");
    args.push_back(buffer->raw());
    buffers.push_back(&buffer);
  }
  Donations given = donations(op.donated, buffers);
  Runtime& runtime = Runtime::get();
  runtime.executables().count_hit();
  std::vector<std::shared_ptr<pjrt::Buffer>> outputs =
      runtime.execute(*op.executable, args, device, given.keep, given.given);
  for (size_t k = 0; k < op.written.size(); ++k) {
    storages[op.written[k]]->set_buffer(std::move(outputs[k]), op.written_types[k]);
  }
  replays.fetch_add(1, std::memory_order_relaxed);
  if (eager_mode() == EagerMode::kDebug) runtime.synchronize(device);
}

void Recording::finish(Launch* launch) {
  if (own_) {
    own_->run(launch);
    if (eager_mode() == EagerMode::kDebug) Runtime::get().synchronize(device_);
    return;
  }
  Pending& p = pending(device_);
  if (!p.program || capturing()) return;
  Program& program = *p.program;
  size_t bytes = program.fingerprint().bytes().size(), nodes = program.size();
  size_t found = 0;
  if (nodes > p.program_nodes) {
    ++p.program_ops;
    ++p.segment_ops;
    if (p.period == 0) {
      found = p.ops.add(bytes - p.program_bytes, nodes - p.program_nodes, p.min_period);
      if (p.segment_ops <= *std::max_element(p.last_segments.begin(), p.last_segments.end())) {
        found = 0;
      }
    }
    p.program_bytes = bytes;
    p.program_nodes = nodes;
  }
  if (p.last_size > 0 && nodes == p.last_size &&
      program.fingerprint().bytes() == p.last_fingerprint) {
    p.period = p.program_ops;  // the step is this program
    p.period_fingerprint = p.last_fingerprint;
    p.mismatches = 0;
    ++repeats;
    run_pending(p, false);
  } else if (p.period > 0 && p.program_ops == p.period) {
    check_period(p);
    ++repeats;
    run_pending(p, false);
  } else if (found > 0) {
    p.period = found;  // the ops so far run as one program; each step from here as another
    ++repeats;
    run_pending(p, false);
  } else if (nodes > max_nodes.load()) {
    run_pending(p, false);
  }
}

}  // namespace torchtpu::engine
