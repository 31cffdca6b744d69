#include "engine/executable_cache.h"

#include <chrono>

namespace torchtpu::engine {

std::shared_ptr<pjrt::Executable> ExecutableCache::get_or_compile(
    const hlo::Fingerprint& key, const std::function<std::string()>& emit,
    const pjrt::Client& client) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = executables_.find(key);
    if (it != executables_.end()) {
      ++stats_.hits;
      return it->second;
    }
  }
  // Compile outside the lock: another thread may compile the same program; the first one stored
  // wins and both results are correct.
  auto start = std::chrono::steady_clock::now();
  std::shared_ptr<pjrt::Executable> exe = client.compile(emit(), pjrt::portable_compile_options());
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.misses;
  stats_.compile_seconds += seconds;
  auto [it, inserted] = executables_.emplace(key, exe);
  stats_.entries = static_cast<int64_t>(executables_.size());
  return it->second;
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
