// Tier 1 of the compile cache: executables in this process, keyed by the program's structural
// fingerprint, so the HLO text is only emitted and compiled on a miss. Bounded by bytes, the least
// recently used executable goes first; one still held elsewhere (a compiled graph's Launch) stays
// valid for its holder.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
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
  int64_t bytes = 0;        // what the entries are charged (see charge())
  int64_t evictions = 0;
  double compile_seconds = 0;
};

class ExecutableCache {
 public:
  static constexpr uint64_t kDefaultMaxBytes = uint64_t{512} << 20;

  // `emit` produces the StableHLO text; it runs only on a miss. `hit`, when given, says which.
  std::shared_ptr<pjrt::Executable> get_or_compile(const hlo::Fingerprint& key,
                                                   const std::function<std::string()>& emit,
                                                   const pjrt::Client& client,
                                                   bool* hit = nullptr);
  // `failed`, the cached executable for `key`, could not run. If it came from the disk cache, its
  // entry is discarded (with a warning) and a freshly compiled executable is returned; otherwise
  // null, and the caller reports the failure.
  std::shared_ptr<pjrt::Executable> recompile_failed(const hlo::Fingerprint& key,
                                                     const pjrt::Executable* failed,
                                                     const std::string& error,
                                                     const std::function<std::string()>& emit,
                                                     const pjrt::Client& client);
  // Counts a hit of an executable its holder kept and ran again without looking it up (an op
  // replayed, eager.h's replay()).
  void count_hit();
  // Whether `key` has an executable in this process (the disk cache is not asked).
  bool contains(const hlo::Fingerprint& key) const;
  CacheStats stats() const;
  void clear();
  void set_max_bytes(uint64_t max_bytes);
  // Misses look in (and fill) this disk cache; null turns tier 2 off.
  void set_disk_cache(std::shared_ptr<DiskCache> disk);
  std::shared_ptr<DiskCache> disk_cache() const;

 private:
  struct Entry {
    std::shared_ptr<pjrt::Executable> executable;
    int64_t bytes;
    bool from_disk;
    std::list<hlo::Fingerprint>::iterator age;  // its place in lru_
  };

  std::shared_ptr<pjrt::Executable> load_or_compile(const std::string& text,
                                                    const pjrt::Client& client, bool& compiled,
                                                    int64_t& serialized_bytes);
  std::shared_ptr<pjrt::Executable> compile_and_store(const std::string& text,
                                                      const pjrt::Client& client,
                                                      int64_t& serialized_bytes);
  // Stores under mutex_, evicting the least recently used beyond the bound; returns the entry
  // kept (another thread's, if it stored the same key first).
  std::shared_ptr<pjrt::Executable> insert(const hlo::Fingerprint& key,
                                           std::shared_ptr<pjrt::Executable> exe, int64_t bytes,
                                           bool from_disk);

  // Drops the least recently used entry (under mutex_).
  void evict_oldest();
  // Every kMappingsCheck misses, before compiling: past half the mappings the kernel allows a
  // process, drops the older half of the entries; past 90 % after that, raises instead of
  // letting the plugin abort the process (see executable_cache.cc).
  void relieve_mappings();
  static constexpr int kMappingsCheck = 16;

  std::shared_ptr<DiskCache> disk_;
  mutable std::mutex mutex_;
  int misses_since_check_ = 0;
  uint64_t max_bytes_ = kDefaultMaxBytes;
  std::unordered_map<hlo::Fingerprint, Entry, hlo::FingerprintHash> executables_;
  std::list<hlo::Fingerprint> lru_;  // most recently used first
  CacheStats stats_;
};

}  // namespace torchtpu::engine
