#include "engine/compile_log.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>

namespace torchtpu::engine {
namespace {

// Earlier programs of the same ops a new one is compared against, and how many op sequences and
// nodes of such programs are remembered at all (past either, the least recently compiled half
// of the op sequences is forgotten: a few hundred bytes a node).
constexpr size_t kComparedPerOps = 8;
constexpr size_t kMaxOpSequences = 4096;
constexpr size_t kMaxKeptNodes = 200000;
// Call sites remembered for the warning, and per site the (ops, input, dimension) whose sizes it
// keeps, and how many distinct sizes of each.
constexpr size_t kMaxSites = 4096;
constexpr size_t kMaxDimensionsPerSite = 256;
constexpr size_t kMaxSizesPerDimension = 1024;
// A site warns when one dimension took at least 1/kVaryingShare as many sizes as it compiled
// programs (or none varied).
constexpr size_t kVaryingShare = 4;

struct History {
  int64_t count = 0;
  std::deque<std::vector<NodeDescription>> recent;
  size_t nodes = 0;  // in `recent`
  uint64_t last_use = 0;
};

std::mutex mutex;
std::unordered_map<uint64_t, History> histories;  // by a hash of the program's op sequence
std::deque<CompileRecord> records;  // the last ones: numbers logged - size + 1 ... logged
uint64_t logged = 0;                 // records logged so far
uint64_t generation = 0;             // clear_compile_log() calls so far
uint64_t changes = 0;                // changes to `records` so far (compile_log_version())
uint64_t clock = 0;
size_t kept_nodes = 0;  // over every history's `recent`
void (*warn)(const std::string&) = nullptr;
int64_t threshold = 0;
std::string (*location_hook)() = nullptr;

// A compile awaiting its Python line: its record's number, its ops and each input's sizes.
struct Unlocated {
  uint64_t number;
  uint64_t generation;  // of the log: one logged before clear_compile_log() is dropped
  std::string ops;
  std::vector<std::vector<int64_t>> input_sizes;
};
thread_local std::vector<Unlocated> unlocated;

// The programs one call site compiled (a Python line; the ops, where no line is known).
using Dimension = std::tuple<std::string, int, int>;  // (ops, input, dimension)
struct Site {
  int64_t count = 0;
  bool warned = false;
  uint64_t last_use = 0;
  std::map<Dimension, std::set<int64_t>> sizes;  // the sizes each input dimension took
};
std::unordered_map<std::string, Site> sites;

// "[2,4]" -> {2, 4}.
std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  const char* p = text.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    long long v = std::strtoll(p, &end, 10);
    if (end == p) {
      ++p;
    } else {
      sizes.push_back(v);
      p = end;
    }
  }
  return sizes;
}

std::vector<std::vector<int64_t>> input_sizes(const std::vector<NodeDescription>& nodes) {
  std::vector<std::vector<int64_t>> inputs;
  for (const NodeDescription& n : nodes) {
    if (n.op != "view_read") continue;
    inputs.emplace_back();
    for (const auto& [key, value] : n.attrs) {
      if (key == "sizes") inputs.back() = parse_sizes(value);
    }
  }
  return inputs;
}

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

// Forgets the least recently used half of `map`'s entries, calling `forget` on each first.
template <typename Map, typename Forget>
void forget_oldest_half(Map& map, Forget forget) {
  std::vector<std::pair<uint64_t, typename Map::key_type>> uses;  // (last use, key)
  for (const auto& [key, entry] : map) uses.emplace_back(entry.last_use, key);
  std::sort(uses.begin(), uses.end());
  for (size_t i = 0; i < uses.size() / 2; ++i) {
    auto found = map.find(uses[i].second);
    forget(found->second);
    map.erase(found);
  }
}

// Counts a located compile at its site; past the threshold, the one warning for that site.
std::string count_at_site(const std::string& where, const Unlocated& compile,
                          const std::string& reason) {
  if (sites.size() >= kMaxSites) forget_oldest_half(sites, [](const Site&) {});
  Site& site = sites[where.empty() ? "ops " + compile.ops : where];
  site.last_use = clock;
  ++site.count;
  for (size_t input = 0; input < compile.input_sizes.size(); ++input) {
    const std::vector<int64_t>& sizes = compile.input_sizes[input];
    for (size_t dim = 0; dim < sizes.size(); ++dim) {
      Dimension key{compile.ops, static_cast<int>(input), static_cast<int>(dim)};
      auto found = site.sizes.find(key);
      if (found == site.sizes.end() && site.sizes.size() >= kMaxDimensionsPerSite) continue;
      std::set<int64_t>& seen = site.sizes[key];
      if (seen.size() < kMaxSizesPerDimension) seen.insert(sizes[dim]);
    }
  }
  if (warn == nullptr || threshold <= 0 || site.count <= threshold || site.warned) return "";
  const std::pair<const Dimension, std::set<int64_t>>* most = nullptr;
  for (const auto& entry : site.sizes) {
    if (most == nullptr || entry.second.size() > most->second.size()) most = &entry;
  }
  // Programs for many shapes that each come once (an optimizer's foreach over parameters of many
  // shapes, in Strict) are compiled once and replayed after: no dimension of them takes many
  // sizes. A size that keeps changing, or a layout or offset that does, is what to warn about.
  if (most != nullptr && most->second.size() > 1 &&
      most->second.size() * kVaryingShare < static_cast<size_t>(site.count)) {
    return "";
  }
  site.warned = true;
  std::string message = "compiling too often";
  message += where.empty() ? " (" + compile.ops + ")" : " at " + where;
  message += ": " + std::to_string(site.count) + " programs";
  if (most != nullptr && most->second.size() > 1) {
    const auto& [ops, input, dim] = most->first;
    message += "; dimension " + std::to_string(dim) + " of input " + std::to_string(input) +
               " of " + ops + " took " + std::to_string(most->second.size()) + " sizes";
  } else {
    message += "; the last because " + reason;
  }
  return message +
         ". Each new shape compiles a program of its own: keep the shapes few (pad inputs to a "
         "few lengths); torchtpu.explain_compiles() lists why each compile happened.";
}

}  // namespace

void log_compile(std::vector<NodeDescription> nodes) {
  std::lock_guard<std::mutex> lock(mutex);
  if (histories.size() >= kMaxOpSequences || kept_nodes + nodes.size() > kMaxKeptNodes) {
    forget_oldest_half(histories, [](const History& h) { kept_nodes -= h.nodes; });
  }
  History& history = histories[op_sequence(nodes)];
  CompileRecord record{label(nodes), reason_for(nodes, history), "", ++history.count};
  unlocated.push_back({++logged, generation, record.ops, input_sizes(nodes)});
  history.last_use = ++clock;
  history.nodes += nodes.size();
  kept_nodes += nodes.size();
  history.recent.push_front(std::move(nodes));
  if (history.recent.size() > kComparedPerOps) {
    history.nodes -= history.recent.back().size();
    kept_nodes -= history.recent.back().size();
    history.recent.pop_back();
  }
  records.push_back(std::move(record));
  ++changes;
  // A thread that compiles and never reaches a Python line keeps no more than the log does.
  if (unlocated.size() > kMaxRecords) unlocated.erase(unlocated.begin());
  if (records.size() > kMaxRecords) records.pop_front();
}

void locate_compiles() {
  if (unlocated.empty()) return;
  std::string where = python_location();
  std::vector<std::string> messages;  // one for each site that crossed the threshold
  void (*warn_now)(const std::string&) = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    uint64_t first = logged + 1 - records.size();  // the number of records.front()
    for (const Unlocated& compile : unlocated) {
      if (compile.generation != generation) continue;
      bool kept = compile.number >= first;
      if (kept) records[compile.number - first].where = where;
      changes += kept;
      std::string warning = count_at_site(
          where, compile, kept ? records[compile.number - first].reason : "(no longer kept)");
      if (!warning.empty()) messages.push_back(std::move(warning));
    }
    if (!messages.empty()) warn_now = warn;
  }
  unlocated.clear();
  for (const std::string& message : messages) warn_now(message);
}

std::string python_location() { return location_hook != nullptr ? location_hook() : ""; }

void set_python_location(std::string (*location)()) { location_hook = location; }

std::vector<CompileRecord> compile_log() {
  std::lock_guard<std::mutex> lock(mutex);
  return {records.begin(), records.end()};
}

uint64_t compile_log_version() {
  std::lock_guard<std::mutex> lock(mutex);
  return changes;
}

void clear_compile_log() {
  std::lock_guard<std::mutex> lock(mutex);
  records.clear();
  histories.clear();
  sites.clear();
  ++generation;
  ++changes;
  kept_nodes = 0;
}

void set_compile_warning(void (*warn_with)(const std::string&), int64_t after) {
  std::lock_guard<std::mutex> lock(mutex);
  warn = warn_with;
  threshold = after;
}

}  // namespace torchtpu::engine
