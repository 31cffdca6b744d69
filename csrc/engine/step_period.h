// Finds the period of a training loop in the stream of ops DeferAndFuse records, so the pending
// program can be cut at the same point of every step even when no host read marks one: each cut
// then runs the same program, compiled once. An op is known here only by what it added to the
// program (fingerprint bytes and nodes), which does not depend on where in the program it sits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace torchtpu::engine {

class StepPeriod {
 public:
  // Notes one op that added `bytes` of fingerprint and `nodes` nodes. Returns a period (in ops)
  // once the ops recorded end with two equal blocks of at least kMinNodes nodes, else 0; the
  // smallest such period of at least `min_ops` ops.
  size_t add(size_t bytes, size_t nodes, size_t min_ops);
  // Forgets the ops seen (a sync point: a host read, a mode switch).
  void clear();

  // As for a repeated program: a few ops that happen to repeat must not cut a longer sequence.
  static constexpr size_t kMinNodes = 64;
  static constexpr size_t kMaxOps = 4096;  // past this many ops without a period, start over

 private:
  uint64_t block(size_t begin, size_t end) const;  // hash of ops [begin, end)

  std::vector<uint64_t> prefix_{0};  // polynomial hash of the first i ops
  std::vector<uint64_t> powers_{1};
  std::vector<size_t> nodes_{0};     // nodes of the first i ops
};

}  // namespace torchtpu::engine
