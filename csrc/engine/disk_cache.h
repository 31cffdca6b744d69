// Tier 2 of the compile cache: serialized executables on disk, shared by processes and restarts.
// An entry's file name is a hash of its key (program text, compile options, plugin and torchtpu
// versions); the entry stores the full key, compared byte for byte on load, and a checksum of key
// and payload. Entries are written atomically (temporary file + rename) and kept under a size
// bound by evicting the least recently used. A bad entry (damaged, written for another key, not a
// regular file) is reported, removed and recompiled, never served.
//
// Trust: a deserialized executable is code that runs in this process, and a checksum cannot tell a
// crafted entry from a good one. So only a folder owned by this user and writable by no one else
// is used (it is created 0700, entries 0600), and only entries owned by this user and writable by
// no one else are loaded; anything else is refused with a warning and the program runs uncached.
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
  int64_t bad_entries = 0;  // damaged, written for another key, or not a regular file
  int64_t refused = 0;      // lookups refused because the folder or entry is not the user's own
};

class DiskCache {
 public:
  // `salt` is everything besides the program that decides the executable: plugin platform and
  // version, compile options, torchtpu's version.
  DiskCache(std::string directory, uint64_t max_bytes, std::string salt);

  const std::string& directory() const { return directory_; }
  // The entry's file name (without suffix) for a program: a hash of its full key.
  std::string key(const std::string& program_text) const;
  // The executable bytes stored for `program_text`, or nothing on a miss, a bad entry (then
  // removed) or an entry or folder this user does not own alone.
  std::optional<std::string> load(const std::string& program_text);
  void store(const std::string& program_text, const std::string& bytes);
  // Removes the program's entry: its executable failed to load or to run.
  void discard(const std::string& program_text);
  // Evicts the least recently used entries beyond the bound (temporary files count, stale ones
  // are removed); returns how many entries went. Every store does it too.
  int64_t prune();
  DiskCacheStats stats() const;

  // Where warnings go (a bad entry, an unwritable or untrusted folder); stderr unless set.
  static void set_warning_handler(std::function<void(const std::string&)> handler);
  static void warn(const std::string& message);

 private:
  enum class Trust { kUnknown, kTrusted, kRefused };

  std::string full_key(const std::string& program_text) const;
  std::string path_of(const std::string& program_text) const;
  bool folder_trusted();  // needs mutex_; creates the folder on first use
  // `fd` is the entry opened for reading, or -1 with `open_error` the errno of the open.
  std::optional<std::string> read_entry(int fd, int open_error, const std::string& path,
                                        const std::string& expected_key);

  std::string directory_;
  uint64_t max_bytes_;
  std::string salt_;
  mutable std::mutex mutex_;
  DiskCacheStats stats_;
  Trust trust_ = Trust::kUnknown;
  bool warned_untrusted_entry_ = false;
};

// 128 bits of hashing, as 32 hex digits: two independent 64-bit hashes of the bytes.
std::string content_hash(const std::string& bytes);

}  // namespace torchtpu::engine
