#include "engine/step_period.h"

namespace torchtpu::engine {
namespace {

constexpr uint64_t kBase = 0x100000001b3ull;

uint64_t mix(uint64_t x) {  // splitmix64's finalizer: nearby sizes get unrelated signatures
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t StepPeriod::block(size_t begin, size_t end) const {
  return prefix_[end] - prefix_[begin] * powers_[end - begin];
}

size_t StepPeriod::add(size_t bytes, size_t nodes, size_t min_ops) {
  if (prefix_.size() > kMaxOps) clear();
  uint64_t signature = mix((static_cast<uint64_t>(bytes) << 20) ^ nodes);
  prefix_.push_back(prefix_.back() * kBase + signature);
  powers_.push_back(powers_.back() * kBase);
  nodes_.push_back(nodes_.back() + nodes);
  size_t n = prefix_.size() - 1;
  for (size_t q = min_ops > 0 ? min_ops : 1; 2 * q <= n; ++q) {
    if (nodes_[n] - nodes_[n - q] >= kMinNodes && block(n - q, n) == block(n - 2 * q, n - q)) {
      return q;
    }
  }
  return 0;
}

void StepPeriod::clear() {
  prefix_.resize(1);
  powers_.resize(1);
  nodes_.resize(1);
}

}  // namespace torchtpu::engine
