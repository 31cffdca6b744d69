#include "engine/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

namespace torchtpu::engine {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'T', 'T', 'P', 'U', 'X', 'C', '0', '2'};
constexpr const char* kSuffix = ".xla";
constexpr const char* kTempMarker = ".tmp.";
constexpr auto kStaleTemp = std::chrono::minutes(10);

uint64_t fnv1a(const std::string& bytes, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t mix(const std::string& bytes) {  // a second, unrelated 64-bit hash (murmur-style)
  uint64_t h = 0x9E3779B97F4A7C15ull ^ bytes.size();
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t k;
    std::memcpy(&k, bytes.data() + i, 8);
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    h ^= k;
    h = (h << 27 | h >> 37) * 5 + 0x52dce729;
  }
  for (; i < bytes.size(); ++i) h = (h ^ static_cast<unsigned char>(bytes[i])) * 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 29);
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

bool write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::function<void(const std::string&)>& warning_handler() {
  static std::function<void(const std::string&)> handler;
  return handler;
}

}  // namespace

std::string content_hash(const std::string& bytes) {
  return hex(fnv1a(bytes, 0)) + hex(mix(bytes));
}

void DiskCache::set_warning_handler(std::function<void(const std::string&)> handler) {
  warning_handler() = std::move(handler);
}

void DiskCache::warn(const std::string& message) {
  if (warning_handler()) {
    warning_handler()(message);
  } else {
    std::cerr << "torchtpu: " << message << std::endl;
  }
}

DiskCache::DiskCache(std::string directory, uint64_t max_bytes, std::string salt)
    : directory_(std::move(directory)), max_bytes_(max_bytes), salt_(std::move(salt)) {}

std::string DiskCache::full_key(const std::string& program_text) const {
  return salt_ + '\0' + program_text;
}

std::string DiskCache::key(const std::string& program_text) const {
  return content_hash(full_key(program_text));
}

std::string DiskCache::path_of(const std::string& program_text) const {
  return (fs::path(directory_) / (key(program_text) + kSuffix)).string();
}

bool DiskCache::folder_trusted() {
  if (trust_ != Trust::kUnknown) return trust_ == Trust::kTrusted;
  std::error_code ignored;
  fs::path folder(directory_);
  if (folder.has_parent_path()) fs::create_directories(folder.parent_path(), ignored);
  ::mkdir(directory_.c_str(), 0700);  // the umask may only narrow it
  struct stat st{};
  std::string problem;
  if (::stat(directory_.c_str(), &st) != 0) {
    problem = "cannot be created (" + std::string(std::strerror(errno)) + ")";
  } else if (!S_ISDIR(st.st_mode)) {
    problem = "is not a directory";
  } else if (st.st_uid != ::geteuid()) {
    problem = "is owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
              std::to_string(::geteuid()) + ")";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    problem = "is writable by other users (mode " + mode_text(st.st_mode) + ")";
  }
  trust_ = problem.empty() ? Trust::kTrusted : Trust::kRefused;
  if (!problem.empty()) {
    warn("the compile cache folder " + directory_ + " " + problem +
         "; executables are only loaded from a folder that this user alone can write (chmod 700 "
         "it, or set TORCHTPU_CACHE_DIR), so programs run uncached");
  }
  return trust_ == Trust::kTrusted;
}

// Entry layout: magic, key size (8 bytes), payload size (8 bytes), checksum of key and payload
// (32 hex digits), key, payload. The checksum finds damage (a truncated or half-copied file, a bit
// flip); it is no signature: anyone who can write the folder can write a self-consistent entry,
// which is why only this user's own private folder and files are read at all.
std::optional<std::string> DiskCache::load(const std::string& program_text) {
  std::string path = path_of(program_text);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!folder_trusted()) {
      ++stats_.refused;
      ++stats_.misses;
      return std::nullopt;
    }
  }
  // O_NOFOLLOW: a symlink is not our entry; O_NONBLOCK: opening a FIFO must not hang.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  int open_error = fd < 0 ? errno : 0;
  if (open_error == ENOENT) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    return std::nullopt;
  }
  std::optional<std::string> payload =
      read_entry(fd, open_error, path, full_key(program_text));
  if (fd >= 0) ::close(fd);
  std::lock_guard<std::mutex> lock(mutex_);
  ++(payload ? stats_.hits : stats_.misses);
  return payload;
}

std::optional<std::string> DiskCache::read_entry(int fd, int open_error, const std::string& path,
                                                 const std::string& expected_key) {
  auto bad = [&](const std::string& why) -> std::optional<std::string> {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++stats_.bad_entries;
    }
    warn("compile cache entry " + path + " " + why + "; recompiling it");
    std::error_code ignored;
    fs::remove(path, ignored);  // a symlink or FIFO goes (not its target), an empty folder too
    return std::nullopt;
  };
  if (open_error == ELOOP) return bad("is a symbolic link");
  struct stat st{};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    return bad("cannot be read (" + std::string(std::strerror(fd < 0 ? open_error : errno)) + ")");
  }
  if (!S_ISREG(st.st_mode)) return bad("is not a regular file");
  if (st.st_uid != ::geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.refused;
    if (!warned_untrusted_entry_) {
      warned_untrusted_entry_ = true;
      warn("compile cache entry " + path + " is owned by uid " + std::to_string(st.st_uid) +
           " with mode " + mode_text(st.st_mode) +
           "; entries that are not this user's own, or that others can write, are not loaded "
           "(this is said once; such entries are recompiled and replaced)");
    }
    return std::nullopt;
  }
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::read(fd, data.data() + done, data.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  data.resize(done);
  constexpr size_t kHeader = 8 + 8 + 8 + 32;
  uint64_t key_size = 0, payload_size = 0;
  bool whole = data.size() >= kHeader && std::memcmp(data.data(), kMagic, 8) == 0;
  if (whole) {
    std::memcpy(&key_size, data.data() + 8, 8);
    std::memcpy(&payload_size, data.data() + 16, 8);
    whole = key_size <= data.size() - kHeader &&
            payload_size == data.size() - kHeader - key_size &&
            data.compare(24, 32, content_hash(data.substr(kHeader))) == 0;
  }
  if (!whole && data.size() >= 8 && std::memcmp(data.data(), kMagic, 6) == 0 &&
      std::memcmp(data.data(), kMagic, 8) != 0) {
    // Another format version (an earlier torchtpu's): replaced without a word, as after any
    // upgrade, instead of one warning per entry.
    std::error_code ignored;
    fs::remove(path, ignored);
    return std::nullopt;
  }
  if (!whole) return bad("is corrupted or truncated");
  if (data.compare(kHeader, key_size, expected_key) != 0) {
    return bad("was written for a different program (its stored key differs)");
  }
  // Reading refreshes the entry's age, so eviction drops the least recently used first.
  ::futimens(fd, nullptr);
  return data.substr(kHeader + key_size);
}

void DiskCache::store(const std::string& program_text, const std::string& bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!folder_trusted()) return;
  }
  std::string path = path_of(program_text);
  // A unique temporary name, then an atomic rename: readers never see a partial entry, and
  // concurrent writers of one key each leave a whole (identical) entry.
  std::random_device random;
  std::string tmp = path + kTempMarker + std::to_string(::getpid()) + "." + hex(random());
  std::string key = full_key(program_text);
  std::string header(kMagic, 8);
  uint64_t sizes[2] = {key.size(), bytes.size()};
  header.append(reinterpret_cast<const char*>(sizes), sizeof(sizes));
  header += content_hash(key + bytes);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool written = fd >= 0 && ::fchmod(fd, 0600) == 0 && write_all(fd, header) &&
                 write_all(fd, key) && write_all(fd, bytes);
  if (fd >= 0) written = ::close(fd) == 0 && written;
  std::error_code error;
  if (!written) {
    warn("cannot write the compile cache in " + directory_ + "; programs run uncached");
    fs::remove(tmp, error);
    return;
  }
  fs::rename(tmp, path, error);
  if (error) {
    fs::remove(tmp, error);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.writes;
  }
  prune();
}

void DiskCache::discard(const std::string& program_text) {
  std::error_code ignored;
  fs::remove(path_of(program_text), ignored);
}

// Temporary files count against the bound too; those older than kStaleTemp were left by a killed
// writer (writing an entry takes well under a second) and are removed.
int64_t DiskCache::prune() {
  struct Entry {
    fs::path path;
    uint64_t bytes;
    fs::file_time_type time;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  auto stale = fs::file_time_type::clock::now() - kStaleTemp;
  std::error_code error;
  for (const auto& e : fs::directory_iterator(directory_, error)) {
    std::error_code ignored;
    if (!e.is_regular_file(ignored) || e.is_symlink(ignored)) continue;
    bool temp = e.path().filename().string().find(kTempMarker) != std::string::npos;
    if (!temp && e.path().extension() != kSuffix) continue;
    uint64_t size = e.file_size(ignored);
    fs::file_time_type time = e.last_write_time(ignored);
    if (temp && time < stale && fs::remove(e.path(), ignored)) continue;
    total += size;
    if (!temp) entries.push_back({e.path(), size, time});
  }
  if (total <= max_bytes_) return 0;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.time < b.time; });
  int64_t removed = 0;
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    std::error_code ignored;
    if (fs::remove(e.path, ignored)) {
      total -= e.bytes;
      ++removed;
    }
  }
  return removed;
}

DiskCacheStats DiskCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace torchtpu::engine
