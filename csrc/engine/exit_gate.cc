#include "engine/exit_gate.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace torchtpu::engine {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> closed{false};
std::atomic<bool (*)()> holds_gil{nullptr}, is_interpreter_thread{nullptr};
std::thread::id exiting_thread;
std::atomic<int> interpreter_threads{0};  // alive interpreter threads that did engine work
std::atomic<int> waiting{0};              // of those, the ones waiting at the gate

thread_local int depth = 0;
struct Counted {
  bool yes = false;
  ~Counted() {
    if (yes) --interpreter_threads;
  }
};
thread_local Counted counted;

void wait_if_closed() {
  if (!closed.load() || std::this_thread::get_id() == exiting_thread) return;
  bool (*gil)() = holds_gil.load();
  if (gil != nullptr && gil()) return;
  if (counted.yes) ++waiting;
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace

void set_thread_questions(ThreadQuestions questions) {
  holds_gil = questions.holds_gil;
  is_interpreter_thread = questions.is_interpreter_thread;
}

void close_for_exit() {
  exiting_thread = std::this_thread::get_id();
  closed = true;
  // Threads still on their way to the gate get there within milliseconds once the GIL is free;
  // one idle in Python (a queue, a sleep) never comes, so stop when none has arrived for a while.
  const auto patience = std::chrono::milliseconds(200);
  const auto deadline = Clock::now() + std::chrono::seconds(2);
  auto last_arrival = Clock::now();
  int seen = waiting.load();
  while (waiting.load() < interpreter_threads.load() - (counted.yes ? 1 : 0)) {
    auto now = Clock::now();
    if (now > deadline || now - last_arrival > patience) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    if (waiting.load() != seen) {
      seen = waiting.load();
      last_arrival = Clock::now();
    }
  }
}

EngineWork::EngineWork() {
  if (depth++ != 0) return;
  if (!counted.yes) {
    bool (*python)() = is_interpreter_thread.load();
    if (python != nullptr && python()) {
      counted.yes = true;
      ++interpreter_threads;
    }
  }
  wait_if_closed();
}

EngineWork::~EngineWork() {
  if (--depth == 0) wait_if_closed();
}

}  // namespace torchtpu::engine
