#include "engine/trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>

#include "pjrt/buffer.h"

namespace torchtpu::engine::trace {
namespace detail {
std::atomic<bool> active{false};
}
namespace {

// A session longer than this keeps its first intervals only (a bound on memory, ~100 MB).
constexpr size_t kMaxIntervals = 1'000'000;

struct Sink {
  std::mutex mutex;
  std::condition_variable finished;
  std::vector<Interval> intervals;
  uint64_t session = 0;  // executions completing after their session ended are dropped
  size_t running = 0;    // executions of this session not yet complete
};

Sink& sink() {
  static auto* s = new Sink();  // completion callbacks may run during exit
  return *s;
}

struct Stacks {
  std::vector<uint64_t> ops, user;
  int64_t flush_nodes = -1;  // inside a DeferAndFuse flush: its program's nodes
};
thread_local Stacks stacks;

int32_t thread_id() {
  thread_local int32_t id = static_cast<int32_t>(syscall(SYS_gettid));
  return id;
}

Interval make(Kind kind, int device, int64_t start, int64_t amount) {
  Interval i;
  i.kind = kind;
  i.device = device;
  i.thread = thread_id();
  i.start_ns = start;
  i.correlation = stacks.ops.empty() ? 0 : stacks.ops.back();
  i.user_ranges = stacks.user;
  i.amount = amount;
  return i;
}

// Adds `i` to the current session; returns its index, or -1 when off or full.
int64_t add(Interval i) {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!enabled() || s.intervals.size() >= kMaxIntervals) return -1;
  s.intervals.push_back(std::move(i));
  return static_cast<int64_t>(s.intervals.size()) - 1;
}

// A device runs its programs one after another: one launched while the one before it still ran
// starts when that one ends.
void queue_executions(std::vector<Interval>& intervals) {
  std::map<int, std::vector<Interval*>> by_device;
  for (Interval& i : intervals) {
    if (i.kind == Kind::kExecute && i.end_ns > 0) by_device[i.device].push_back(&i);
  }
  for (auto& [device, list] : by_device) {
    std::stable_sort(list.begin(), list.end(), [](const Interval* a, const Interval* b) {
      return a->start_ns < b->start_ns;
    });
    int64_t previous_end = 0;
    for (Interval* i : list) {
      if (previous_end > i->start_ns && previous_end < i->end_ns) i->start_ns = previous_end;
      previous_end = std::max(previous_end, i->end_ns);
    }
  }
}

}  // namespace

bool on_device(Kind kind) { return kind != Kind::kCompile && kind != Kind::kFlush; }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void start() {
  Sink& s = sink();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.intervals.clear();
  ++s.session;
  s.running = 0;
  detail::active = true;
}

std::vector<Interval> stop(std::chrono::milliseconds wait) {
  Sink& s = sink();
  std::unique_lock<std::mutex> lock(s.mutex);
  detail::active = false;
  s.finished.wait_for(lock, wait, [&] { return s.running == 0; });
  ++s.session;
  std::vector<Interval> out;
  out.swap(s.intervals);
  lock.unlock();
  out.erase(std::remove_if(out.begin(), out.end(), [](const Interval& i) { return i.end_ns == 0; }),
            out.end());
  queue_executions(out);
  return out;
}

int64_t bytes(size_t element_bytes, const std::vector<int64_t>& dims) {
  int64_t n = static_cast<int64_t>(element_bytes);
  for (int64_t d : dims) n *= d;
  return n;
}

void to_host(const pjrt::Buffer& buffer, void* dst, size_t size, int device) {
  if (enabled()) buffer.await_ready();
  Range copy(Kind::kCopyToHost, device, static_cast<int64_t>(size));
  buffer.to_host(dst, size);
}

void push_correlation(uint64_t id, bool user) { (user ? stacks.user : stacks.ops).push_back(id); }

void pop_correlation(bool user) {
  std::vector<uint64_t>& stack = user ? stacks.user : stacks.ops;
  if (!stack.empty()) stack.pop_back();  // a session may start inside an op
}

Range::Range(Kind kind, int device, int64_t amount)
    : kind_(kind), device_(device), amount_(amount), start_(launch_time()) {
  if (start_ != 0 && kind_ == Kind::kFlush) stacks.flush_nodes = amount_;
}

Range::~Range() {
  if (start_ == 0) return;
  if (kind_ == Kind::kFlush) stacks.flush_nodes = -1;
  Interval i = make(kind_, device_, start_, amount_);
  i.end_ns = now_ns();
  i.name = std::move(name_);
  add(std::move(i));
}

void launched(int64_t launch_ns, int device, const pjrt::Event* done) {
  if (launch_ns == 0) return;
  Interval i = make(Kind::kExecute, device, launch_ns, stacks.flush_nodes);
  if (stacks.flush_nodes >= 0) {
    i.name = "fused program (" + std::to_string(stacks.flush_nodes) + " nodes)";
  }
  if (done == nullptr) i.end_ns = now_ns();
  Sink& s = sink();
  uint64_t session;
  int64_t index;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (!enabled() || s.intervals.size() >= kMaxIntervals) return;
    s.intervals.push_back(std::move(i));
    index = static_cast<int64_t>(s.intervals.size()) - 1;
    session = s.session;
    if (done != nullptr) ++s.running;
  }
  if (done == nullptr) return;
  // Runs on a plugin thread: takes only the sink's lock (never the GIL, never a device's).
  auto complete = [session, index](const std::string&) {
    int64_t end = now_ns();
    Sink& s = sink();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.session != session) return;
    s.intervals[index].end_ns = end;
    if (--s.running == 0) s.finished.notify_all();
  };
  try {
    done->on_ready(complete);
  } catch (const std::exception&) {
    complete("");  // a plugin without OnReady: the launch is all that is known
  }
}

}  // namespace torchtpu::engine::trace
