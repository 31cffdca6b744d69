// Tier 2 of the compile cache: serialized executables on disk, shared by processes and restarts.
// Entries are content-addressed (program text, compile options, plugin and torchtpu versions),
// written atomically (temporary file + rename), verified on read (a bad entry is reported,
// removed and recompiled, never served), and kept under a size bound by evicting the least
// recently used.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace torchtpu::engine {

struct DiskCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t writes = 0;
  int64_t bad_entries = 0;
};

class DiskCache {
 public:
  // `salt` is everything besides the program that decides the executable: plugin platform and
  // version, compile options, torchtpu's version.
  DiskCache(std::string directory, uint64_t max_bytes, std::string salt);

  const std::string& directory() const { return directory_; }
  // The entry's name for a program.
  std::string key(const std::string& program_text) const;
  // The stored executable bytes, or nothing on a miss or a bad entry (then removed).
  std::optional<std::string> load(const std::string& key);
  void store(const std::string& key, const std::string& bytes);
  DiskCacheStats stats() const;

  // Where warnings go (a bad entry, an unwritable directory); stderr unless set.
  static void set_warning_handler(std::function<void(const std::string&)> handler);
  static void warn(const std::string& message);

 private:
  std::string path_of(const std::string& key) const;
  void evict();

  std::string directory_;
  uint64_t max_bytes_;
  std::string salt_;
  mutable std::mutex mutex_;
  DiskCacheStats stats_;
};

// 128 bits of hashing, as 32 hex digits: two independent 64-bit hashes of the bytes.
std::string content_hash(const std::string& bytes);

}  // namespace torchtpu::engine
