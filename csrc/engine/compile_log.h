// Why each program was compiled: every executable-cache miss of this process is logged with what
// differed from the nearest program of the same ops compiled before it (an input's sizes,
// strides, element type, a static attribute), and the Python line that issued it where known.
// Past a threshold of programs compiled at one Python line (or, where none is known, of the same
// ops), one warning says so and names the input dimension that took the most sizes there. Work
// happens only on a miss.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torchtpu::engine {

// One node of a compiled program as the log compares it: its op ("argument" for a parameter)
// and its attributes as (name, value) text.
struct NodeDescription {
  std::string op;
  std::vector<std::pair<std::string, std::string>> attrs;
};

struct CompileRecord {
  std::string ops;     // the program's ops: "aten::add", or "12 ops: view_read ... view_write"
  std::string reason;  // what differed from the nearest earlier program of the same ops
  std::string where;   // the Python line that issued it ("train.py:12"), empty if not known
  int64_t same_ops;    // programs of the same ops compiled so far, this one included
};

// Logs a miss: `nodes` in program order. Programs run under the recording lock, where the
// interpreter's lock must not be taken, so the Python line comes later: locate_compiles().
void log_compile(std::vector<NodeDescription> nodes);
// Gives the compiles this thread logged since its last call the Python line running now, counts
// them at that line, and says the warning they crossed. For a thread holding no engine lock (the end of an op, a read to
// the host); nothing to do, and cheap, when it logged none.
void locate_compiles();
// The Python line running now ("train.py:12"; empty without the hook the Python module sets).
// It takes the interpreter's lock: only for a thread holding no engine lock.
std::string python_location();
void set_python_location(std::string (*location)());
// The last records, oldest first (at most kMaxRecords).
std::vector<CompileRecord> compile_log();
// Changes when compile_log() would: a record logged or given its Python line, or the log cleared.
uint64_t compile_log_version();
void clear_compile_log();
// Past `threshold` programs at one call site (0: never), `warn` gets one message for that site.
void set_compile_warning(void (*warn)(const std::string&), int64_t threshold);

constexpr size_t kMaxRecords = 10000;

}  // namespace torchtpu::engine
