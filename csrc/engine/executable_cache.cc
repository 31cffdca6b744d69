#include "engine/executable_cache.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "engine/trace.h"

namespace torchtpu::engine {
namespace {

// What an executable is charged against the bound. PJRT reports at most the generated code, a
// part of what a loaded executable holds (the CPU plugin reports 0; a one-op executable serializes
// to ~4 KiB and costs ~125 KiB of resident memory), so the charge has a floor near that cost; the
// serialized size, when known, measures large programs better.
int64_t charge(const pjrt::Executable& exe, int64_t serialized_bytes) {
  constexpr int64_t kFloor = int64_t{128} << 10;
  return std::max({kFloor, exe.generated_code_bytes(), serialized_bytes});
}

// The memory mappings this process holds (the lines of /proc/self/maps), or -1 where unknown.
int64_t process_mappings() {
  std::ifstream maps("/proc/self/maps", std::ios::binary);
  if (!maps) return -1;
  int64_t lines = 0;
  char chunk[1 << 16];
  while (maps.read(chunk, sizeof chunk) || maps.gcount() > 0) {
    lines += std::count(chunk, chunk + maps.gcount(), '\n');
  }
  return lines;
}

// The most mappings the kernel allows a process (vm.max_map_count), or -1 where unknown.
int64_t max_process_mappings() {
  static const int64_t most = [] {
    std::ifstream f("/proc/sys/vm/max_map_count");
    int64_t n = -1;
    return (f >> n) ? n : int64_t{-1};
  }();
  return most;
}

}  // namespace

void ExecutableCache::relieve_mappings() {
  // The CPU plugin maps each executable's code in many pieces (some 150 mappings for a small
  // transformer block's training step), and a compile that finds no mapping left aborts the
  // process inside the plugin ("LLVM ERROR: Unable to allocate section memory!"): a process
  // compiling ever new shapes reached vm.max_map_count (65,530 by default) after about 400 such
  // programs, far below the byte bound. Reading the count costs about 1 us a mapping, so it is
  // read only every kMappingsCheck misses, with room left for that many compiles in between.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (++misses_since_check_ < kMappingsCheck) return;
    misses_since_check_ = 0;
  }
  int64_t most = max_process_mappings();
  if (most <= 0 || process_mappings() <= most / 2) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t drop = lru_.size() / 2; drop > 0; --drop) evict_oldest();
    stats_.entries = static_cast<int64_t>(executables_.size());
  }
  int64_t now = process_mappings();
  if (now > most / 10 * 9) {  // held elsewhere: a compile now could abort the process
    throw std::runtime_error(
        "torchtpu: the process holds " + std::to_string(now) + " memory mappings of the " +
        std::to_string(most) + " the kernel allows (vm.max_map_count), and each compiled "
        "program takes more; compiling another could abort the process, so it is refused. "
        "Free tensors and compiled functions holding programs, compile fewer shapes "
        "(TORCHTPU_SHAPE_BUCKETS), or raise vm.max_map_count");
  }
}

std::shared_ptr<pjrt::Executable> ExecutableCache::get_or_compile(
    const hlo::Fingerprint& key, const std::function<std::string()>& emit,
    const pjrt::Client& client, bool* hit) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = executables_.find(key);
    if (hit != nullptr) *hit = it != executables_.end();
    if (it != executables_.end()) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, it->second.age);
      return it->second.executable;
    }
  }
  // Compile outside the lock: another thread may compile the same program; the first one stored
  // wins and both results are correct.
  relieve_mappings();
  auto start = std::chrono::steady_clock::now();
  bool compiled = false;
  int64_t serialized_bytes = 0;
  trace::Range range(trace::Kind::kCompile, -1);
  std::shared_ptr<pjrt::Executable> exe =
      load_or_compile(emit(), client, compiled, serialized_bytes);
  range.rename(compiled ? "" : "load from compile cache");
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t bytes = charge(*exe, serialized_bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.misses;
  ++(compiled ? stats_.compiled : stats_.disk_loads);
  if (compiled) stats_.compile_seconds += seconds;
  return insert(key, std::move(exe), bytes, !compiled);
}

void ExecutableCache::evict_oldest() {
  auto oldest = executables_.find(lru_.back());
  stats_.bytes -= oldest->second.bytes;
  executables_.erase(oldest);
  lru_.pop_back();
  ++stats_.evictions;
}

void ExecutableCache::count_hit() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.hits;
}

bool ExecutableCache::contains(const hlo::Fingerprint& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return executables_.count(key) > 0;
}

std::shared_ptr<pjrt::Executable> ExecutableCache::insert(const hlo::Fingerprint& key,
                                                          std::shared_ptr<pjrt::Executable> exe,
                                                          int64_t bytes, bool from_disk) {
  auto found = executables_.find(key);
  if (found != executables_.end()) return found->second.executable;
  lru_.push_front(key);
  executables_.emplace(key, Entry{std::move(exe), bytes, from_disk, lru_.begin()});
  stats_.bytes += bytes;
  // The newest entry always stays, even alone above the bound: it is about to run.
  while (static_cast<uint64_t>(stats_.bytes) > max_bytes_ && lru_.size() > 1) evict_oldest();
  stats_.entries = static_cast<int64_t>(executables_.size());
  return executables_.at(key).executable;
}

namespace {

// TORCHTPU_DUMP_PROGRAMS=<folder>: every program this process looks up on a miss of the
// in-process cache is written there as <content hash>.mlir (eager programs included, which
// TORCHTPU_COMPILE_DEBUG does not show). The folder is made if need be.
void dump_program(const std::string& text) {
  static const char* folder = std::getenv("TORCHTPU_DUMP_PROGRAMS");
  if (folder == nullptr || *folder == '\0') return;
  static const bool made = [] {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    return true;
  }();
  (void)made;
  std::ofstream(std::string(folder) + "/" + content_hash(text) + ".mlir") << text;
}

}  // namespace

std::shared_ptr<pjrt::Executable> ExecutableCache::load_or_compile(const std::string& text,
                                                                   const pjrt::Client& client,
                                                                   bool& compiled,
                                                                   int64_t& serialized_bytes) {
  dump_program(text);
  std::shared_ptr<DiskCache> disk = disk_cache();
  if (disk) {
    if (std::optional<std::string> bytes = disk->load(text)) {
      try {
        serialized_bytes = static_cast<int64_t>(bytes->size());
        return client.deserialize(*bytes);
      } catch (const pjrt::Error& e) {
        DiskCache::warn(std::string("a compile cache entry could not be loaded (") + e.what() +
                        "); recompiling it");
        disk->discard(text);
      }
    }
  }
  compiled = true;
  return compile_and_store(text, client, serialized_bytes);
}

std::shared_ptr<pjrt::Executable> ExecutableCache::compile_and_store(const std::string& text,
                                                                     const pjrt::Client& client,
                                                                     int64_t& serialized_bytes) {
  std::shared_ptr<pjrt::Executable> exe = client.compile(text, pjrt::portable_compile_options());
  if (std::shared_ptr<DiskCache> disk = disk_cache()) {
    try {
      std::string bytes = exe->serialize();
      serialized_bytes = static_cast<int64_t>(bytes.size());
      disk->store(text, bytes);
    } catch (const pjrt::Error& e) {
      DiskCache::warn(std::string("the PJRT plugin cannot serialize executables (") + e.what() +
                      "), so the compile cache is off: programs run uncached");
      set_disk_cache(nullptr);
    }
  }
  return exe;
}

std::shared_ptr<pjrt::Executable> ExecutableCache::recompile_failed(
    const hlo::Fingerprint& key, const pjrt::Executable* failed, const std::string& error,
    const std::function<std::string()>& emit, const pjrt::Client& client) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = executables_.find(key);
    if (it == executables_.end() || it->second.executable.get() != failed ||
        !it->second.from_disk) {
      return nullptr;
    }
    stats_.bytes -= it->second.bytes;
    lru_.erase(it->second.age);
    executables_.erase(it);
    stats_.entries = static_cast<int64_t>(executables_.size());
  }
  DiskCache::warn("an executable loaded from the compile cache failed to run (" + error +
                  "); discarding its entry and recompiling it");
  std::string text = emit();
  if (std::shared_ptr<DiskCache> disk = disk_cache()) disk->discard(text);
  auto start = std::chrono::steady_clock::now();
  int64_t serialized_bytes = 0;
  std::shared_ptr<pjrt::Executable> exe = compile_and_store(text, client, serialized_bytes);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t bytes = charge(*exe, serialized_bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.compiled;
  stats_.compile_seconds += seconds;
  return insert(key, std::move(exe), bytes, false);
}

void ExecutableCache::set_max_bytes(uint64_t max_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  max_bytes_ = max_bytes;
}

void ExecutableCache::set_disk_cache(std::shared_ptr<DiskCache> disk) {
  std::lock_guard<std::mutex> lock(mutex_);
  disk_ = std::move(disk);
}

std::shared_ptr<DiskCache> ExecutableCache::disk_cache() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return disk_;
}

CacheStats ExecutableCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void ExecutableCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  executables_.clear();
  lru_.clear();
  stats_ = CacheStats{};
}

}  // namespace torchtpu::engine
