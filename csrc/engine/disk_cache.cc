#include "engine/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

namespace torchtpu::engine {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'T', 'T', 'P', 'U', 'X', 'C', '0', '1'};
constexpr const char* kSuffix = ".xla";

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

std::string DiskCache::key(const std::string& program_text) const {
  return content_hash(salt_ + '\0' + program_text);
}

std::string DiskCache::path_of(const std::string& key) const {
  return (fs::path(directory_) / (key + kSuffix)).string();
}

// Entry layout: magic, payload size (8 bytes), payload hash (32 hex digits), payload.
std::optional<std::string> DiskCache::load(const std::string& key) {
  std::string path = path_of(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.misses;
    return std::nullopt;
  }
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bool good = data.size() >= 8 + 8 + 32 && std::memcmp(data.data(), kMagic, 8) == 0;
  std::string payload;
  if (good) {
    uint64_t size;
    std::memcpy(&size, data.data() + 8, 8);
    good = data.size() == 8 + 8 + 32 + size;
    if (good) {
      payload = data.substr(48);
      good = data.compare(16, 32, content_hash(payload)) == 0;
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!good) {
    ++stats_.bad_entries;
    ++stats_.misses;
    warn("compile cache entry " + path + " is corrupted or truncated; recompiling it");
    std::error_code ignored;
    fs::remove(path, ignored);
    return std::nullopt;
  }
  ++stats_.hits;
  // Reading refreshes the entry's age, so eviction drops the least recently used first.
  std::error_code ignored;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ignored);
  return payload;
}

void DiskCache::store(const std::string& key, const std::string& bytes) {
  std::error_code error;
  fs::create_directories(directory_, error);
  std::string path = path_of(key);
  // A unique temporary name, then an atomic rename: readers never see a partial entry, and
  // concurrent writers of one key each leave a whole (identical) entry.
  std::random_device random;
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + hex(random());
  {
    std::ofstream out(tmp, std::ios::binary);
    uint64_t size = bytes.size();
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out << content_hash(bytes);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      warn("cannot write the compile cache in " + directory_ + "; programs run uncached");
      fs::remove(tmp, error);
      return;
    }
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
  evict();
}

void DiskCache::evict() {
  struct Entry {
    fs::path path;
    uint64_t bytes;
    fs::file_time_type time;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code error;
  for (const auto& e : fs::directory_iterator(directory_, error)) {
    if (e.path().extension() != kSuffix) continue;
    std::error_code ignored;
    uint64_t size = e.file_size(ignored);
    entries.push_back({e.path(), size, e.last_write_time(ignored)});
    total += size;
  }
  if (total <= max_bytes_) return;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.time < b.time; });
  for (const Entry& e : entries) {
    if (total <= max_bytes_) break;
    std::error_code ignored;
    if (fs::remove(e.path, ignored)) total -= e.bytes;
  }
}

DiskCacheStats DiskCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace torchtpu::engine
