// The structural fingerprint of a program: the exact bytes of its structure, hashed once.
// Equal fingerprints mean equal programs, so executables are cached by it without emitting text.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "hlo/types.h"

namespace torchtpu::hlo {

class Fingerprint {
 public:
  void add(int64_t v) { append(&v, sizeof(v)); }
  void add(double v) { append(&v, sizeof(v)); }
  void add(std::string_view s) {
    add(static_cast<int64_t>(s.size()));
    bytes_.append(s.data(), s.size());
  }
  void add(const std::vector<int64_t>& v) { add_ints(v.data(), v.size()); }
  // The same bytes as add() of a vector holding these values, without making one.
  void add_ints(const int64_t* values, size_t n) {
    add(static_cast<int64_t>(n));
    append(values, n * sizeof(int64_t));
  }
  void add_ints(const std::vector<int>& values) {
    add(static_cast<int64_t>(values.size()));
    for (int v : values) add(static_cast<int64_t>(v));
  }
  void add(const Shape& shape) {
    add(static_cast<int64_t>(shape.type));
    add(shape.dims);
  }

  // The bytes of `other`, as if what was added to it were added here.
  void add_bytes(const Fingerprint& other) { bytes_.append(other.bytes_); }

  void reserve(size_t bytes) { bytes_.reserve(bytes); }  // one allocation for a short key
  void clear() { bytes_.clear(); }                          // empty, keeping the allocation
  const std::string& bytes() const { return bytes_; }
  size_t hash() const { return std::hash<std::string>()(bytes_); }
  // A stable 64-bit digest (FNV-1a), for file names and logs.
  uint64_t digest() const;
  bool operator==(const Fingerprint& other) const { return bytes_ == other.bytes_; }

 private:
  void append(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  std::string bytes_;
};

struct FingerprintHash {
  size_t operator()(const Fingerprint& f) const { return f.hash(); }
};

inline uint64_t Fingerprint::digest() const {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes_) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace torchtpu::hlo
