// Tier 1 of the compile cache: executables in this process, keyed by the program's structural
// fingerprint, so the HLO text is only emitted and compiled on a miss.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/disk_cache.h"
#include "hlo/fingerprint.h"
#include "pjrt/client.h"

namespace torchtpu::engine {

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t compiled = 0;     // misses compiled here (the rest came from the disk cache)
  int64_t disk_loads = 0;   // misses served by the disk cache
  int64_t entries = 0;
  double compile_seconds = 0;
};

class ExecutableCache {
 public:
  // `emit` produces the StableHLO text; it runs only on a miss. `hit`, when given, says which.
  std::shared_ptr<pjrt::Executable> get_or_compile(const hlo::Fingerprint& key,
                                                   const std::function<std::string()>& emit,
                                                   const pjrt::Client& client,
                                                   bool* hit = nullptr);
  CacheStats stats() const;
  void clear();
  // Misses look in (and fill) this disk cache; null turns tier 2 off.
  void set_disk_cache(std::shared_ptr<DiskCache> disk);
  std::shared_ptr<DiskCache> disk_cache() const;

 private:
  std::shared_ptr<pjrt::Executable> load_or_compile(const std::string& text,
                                                    const pjrt::Client& client, bool& compiled);

  std::shared_ptr<DiskCache> disk_;
  mutable std::mutex mutex_;
  std::unordered_map<hlo::Fingerprint, std::shared_ptr<pjrt::Executable>, hlo::FingerprintHash>
      executables_;
  CacheStats stats_;
};

}  // namespace torchtpu::engine
