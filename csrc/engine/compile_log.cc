#include "engine/compile_log.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace torchtpu::engine {
namespace {

// Earlier programs of the same ops a new one is compared against, and how many op sequences and
// nodes of such programs are remembered at all (past either, the least recently compiled half
// of the op sequences is forgotten: a few hundred bytes a node).
constexpr size_t kComparedPerOps = 8;
constexpr size_t kMaxOpSequences = 4096;
constexpr size_t kMaxKeptNodes = 200000;

struct History {
  int64_t count = 0;
  bool warned = false;
  std::deque<std::vector<NodeDescription>> recent;
  size_t nodes = 0;  // in `recent`
  uint64_t last_use = 0;
};

std::mutex mutex;
std::unordered_map<uint64_t, History> histories;  // by a hash of the program's op sequence
std::deque<CompileRecord> records;  // the last ones: numbers logged - size + 1 ... logged
uint64_t logged = 0;                 // records logged so far
uint64_t clock = 0;
size_t kept_nodes = 0;  // over every history's `recent`
void (*warn)(const std::string&) = nullptr;
int64_t threshold = 0;
std::string (*location_hook)() = nullptr;

// This thread's compiles awaiting their Python line (by number), and the warning they crossed.
thread_local std::vector<uint64_t> unlocated;
thread_local std::string pending_warning;

bool structural(const std::string& op) {
  return op == "argument" || op == "view_read" || op == "view_write" || op == "zeros" ||
         op == "#";
}

uint64_t op_sequence(const std::vector<NodeDescription>& nodes) {
  std::string key;
  for (const NodeDescription& n : nodes) key += n.op + ";";
  return std::hash<std::string>()(key);
}

// "aten::add" for a program of one op; "12 ops: aten::mm ... aten::sum" for more.
std::string label(const std::vector<NodeDescription>& nodes) {
  std::vector<const std::string*> ops;
  for (const NodeDescription& n : nodes) {
    if (!structural(n.op)) ops.push_back(&n.op);
  }
  if (ops.empty()) return "a copy";
  if (ops.size() == 1) return *ops[0];
  return std::to_string(ops.size()) + " ops: " + *ops.front() + " ... " + *ops.back();
}

// What differs between two programs of the same op sequence, node by node; the inputs' reads
// first, as they say which input changed.
std::vector<std::string> differences(const std::vector<NodeDescription>& now,
                                     const std::vector<NodeDescription>& before) {
  std::vector<std::string> reads, others;
  int input = 0, argument = 0;
  for (size_t i = 0; i < now.size(); ++i) {
    const NodeDescription& n = now[i];
    std::string name = n.op == "view_read"  ? "input " + std::to_string(input++)
                       : n.op == "argument" ? "argument " + std::to_string(argument++)
                                            : n.op + " (node " + std::to_string(i) + ")";
    std::string change;
    for (size_t k = 0; k < n.attrs.size(); ++k) {
      const auto& [key, value] = n.attrs[k];
      const std::string* old = nullptr;
      for (const auto& [old_key, old_value] : before[i].attrs) {
        if (old_key == key) old = &old_value;
      }
      if (old != nullptr && *old == value) continue;
      change += (change.empty() ? "" : ", ") + key + " " + value +
                (old != nullptr ? " instead of " + *old : " (new)");
    }
    if (n.attrs.size() != before[i].attrs.size() && change.empty()) change = "other attributes";
    if (!change.empty()) (n.op == "view_read" ? reads : others).push_back(name + ": " + change);
  }
  reads.insert(reads.end(), others.begin(), others.end());
  return reads;
}

std::string reason_for(const std::vector<NodeDescription>& nodes, const History& history) {
  if (history.recent.empty()) return "the first program of these ops";
  std::vector<std::string> nearest;
  bool found = false;
  for (const auto& before : history.recent) {
    std::vector<std::string> d = differences(nodes, before);
    if (!found || d.size() < nearest.size()) nearest = std::move(d);
    found = true;
  }
  if (nearest.empty()) {
    return "the same ops and attributes as an earlier program (it was evicted from the cache, "
           "or its buffers were donated differently)";
  }
  std::string reason = nearest[0];
  if (nearest.size() > 1) reason += "; " + nearest[1];
  if (nearest.size() > 2) reason += "; and " + std::to_string(nearest.size() - 2) + " more";
  return reason;
}

void forget_oldest_half() {
  std::vector<std::pair<uint64_t, uint64_t>> uses;  // (last use, key)
  for (const auto& [key, h] : histories) uses.emplace_back(h.last_use, key);
  std::sort(uses.begin(), uses.end());
  for (size_t i = 0; i < uses.size() / 2; ++i) {
    uint64_t key = uses[i].second;
    kept_nodes -= histories[key].nodes;
    histories.erase(key);
  }
}

}  // namespace

void log_compile(std::vector<NodeDescription> nodes) {
  std::lock_guard<std::mutex> lock(mutex);
  if (histories.size() >= kMaxOpSequences || kept_nodes + nodes.size() > kMaxKeptNodes) {
    forget_oldest_half();
  }
  History& history = histories[op_sequence(nodes)];
  CompileRecord record{label(nodes), reason_for(nodes, history), "", ++history.count};
  history.last_use = ++clock;
  history.nodes += nodes.size();
  kept_nodes += nodes.size();
  history.recent.push_front(std::move(nodes));
  if (history.recent.size() > kComparedPerOps) {
    history.nodes -= history.recent.back().size();
    kept_nodes -= history.recent.back().size();
    history.recent.pop_back();
  }
  if (threshold > 0 && history.count > threshold && !history.warned && warn != nullptr) {
    history.warned = true;
    pending_warning = "compiled " + std::to_string(history.count) +
                      " programs of the same ops (" + record.ops + "); the last because " +
                      record.reason;
  }
  records.push_back(std::move(record));
  unlocated.push_back(++logged);
  if (records.size() > kMaxRecords) records.pop_front();
}

void locate_compiles() {
  if (unlocated.empty()) return;
  std::string where = python_location();
  std::string message;
  void (*warn_now)(const std::string&) = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    uint64_t first = logged + 1 - records.size();  // the number of records.front()
    for (uint64_t n : unlocated) {
      if (n >= first) records[n - first].where = where;  // else no longer kept
    }
    if (!pending_warning.empty() && warn != nullptr) {
      warn_now = warn;
      message = pending_warning + (where.empty() ? "" : " (at " + where + ")") +
                ". Each new shape compiles a program of its own; torchtpu.explain_compiles() "
                "lists why each compile happened.";
    }
  }
  unlocated.clear();
  pending_warning.clear();
  if (warn_now != nullptr) warn_now(message);
}

std::string python_location() { return location_hook != nullptr ? location_hook() : ""; }

void set_python_location(std::string (*location)()) { location_hook = location; }

std::vector<CompileRecord> compile_log() {
  std::lock_guard<std::mutex> lock(mutex);
  return {records.begin(), records.end()};
}

void clear_compile_log() {
  std::lock_guard<std::mutex> lock(mutex);
  records.clear();
  histories.clear();
  kept_nodes = 0;
}

void set_compile_warning(void (*warn_with)(const std::string&), int64_t after) {
  std::lock_guard<std::mutex> lock(mutex);
  warn = warn_with;
  threshold = after;
}

}  // namespace torchtpu::engine
