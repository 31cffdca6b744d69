// Interpreter exit while other threads still run tpu ops. Python 3.11 ends a thread that wants
// the GIL back once finalization began by unwinding it (pthread_exit); the unwind meets PyTorch's
// noexcept frames between a kernel and the interpreter and calls std::terminate, so the process
// aborts. From close_for_exit() on, a thread other than the exiting one that starts or finishes
// engine work (outermost EngineWork) waits there for the process to end instead, holding no
// engine lock, and never goes back into the interpreter.
#pragma once

namespace torchtpu::engine {

// What the Python layer knows about the calling thread.
struct ThreadQuestions {
  bool (*holds_gil)();      // it must not wait forever: the exiting thread needs the GIL
  bool (*is_interpreter_thread)();  // it has Python state, so it may be waiting for the GIL
};
void set_thread_questions(ThreadQuestions questions);

// Closes the gate. Call it with the GIL released: it then waits (briefly, while other
// interpreter threads that did engine work keep arriving at the gate) so that threads that were
// waiting for the GIL between two ops reach their next op and wait there.
void close_for_exit();

// One kernel's engine work: recording an op, a read to the host, a wait.
class EngineWork {
 public:
  EngineWork();
  EngineWork(const EngineWork&) = delete;
  EngineWork& operator=(const EngineWork&) = delete;
  ~EngineWork();
};

}  // namespace torchtpu::engine
