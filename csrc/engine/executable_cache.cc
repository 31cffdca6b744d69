#include "engine/executable_cache.h"

#include <chrono>

namespace torchtpu::engine {

std::shared_ptr<pjrt::Executable> ExecutableCache::get_or_compile(
    const hlo::Fingerprint& key, const std::function<std::string()>& emit,
    const pjrt::Client& client, bool* hit) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = executables_.find(key);
    if (hit != nullptr) *hit = it != executables_.end();
    if (it != executables_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  // Compile outside the lock: another thread may compile the same program; the first one stored
  // wins and both results are correct.
  auto start = std::chrono::steady_clock::now();
  bool compiled = false;
  std::shared_ptr<pjrt::Executable> exe = load_or_compile(emit(), client, compiled);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.misses;
  ++(compiled ? stats_.compiled : stats_.disk_loads);
  if (compiled) stats_.compile_seconds += seconds;
  auto [it, inserted] = executables_.emplace(key, exe);
  stats_.entries = static_cast<int64_t>(executables_.size());
  return it->second;
}

std::shared_ptr<pjrt::Executable> ExecutableCache::load_or_compile(const std::string& text,
                                                                   const pjrt::Client& client,
                                                                   bool& compiled) {
  std::shared_ptr<DiskCache> disk = disk_cache();
  std::string key = disk ? disk->key(text) : std::string();
  if (disk) {
    if (std::optional<std::string> bytes = disk->load(key)) {
      try {
        return client.deserialize(*bytes);
      } catch (const pjrt::Error& e) {
        DiskCache::warn(std::string("a compile cache entry could not be loaded (") + e.what() +
                        "); recompiling it");
      }
    }
  }
  std::shared_ptr<pjrt::Executable> exe = client.compile(text, pjrt::portable_compile_options());
  compiled = true;
  if (disk) {
    try {
      disk->store(key, exe->serialize());
    } catch (const pjrt::Error& e) {
      DiskCache::warn(std::string("the PJRT plugin cannot serialize executables (") + e.what() +
                      "), so the compile cache is off: programs run uncached");
      set_disk_cache(nullptr);
    }
  }
  return exe;
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
  stats_ = CacheStats{};
}

}  // namespace torchtpu::engine
