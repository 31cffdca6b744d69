// The period finder DeferAndFuse cuts a training loop with (csrc/engine/step_period.h).
#include <gtest/gtest.h>

#include "engine/step_period.h"

namespace torchtpu::engine {
namespace {

struct Op {
  size_t bytes, nodes;
};

// Feeds `ops` `times` times; returns the period reported first (0: none) and after how many ops.
std::pair<size_t, size_t> first_period(StepPeriod& finder, const std::vector<Op>& ops, int times,
                                       size_t min_ops = 1) {
  size_t seen = 0;
  for (int t = 0; t < times; ++t) {
    for (const Op& op : ops) {
      ++seen;
      if (size_t q = finder.add(op.bytes, op.nodes, min_ops)) return {q, seen};
    }
  }
  return {0, seen};
}

const std::vector<Op> kStep = {{40, 6}, {56, 8}, {40, 6}, {72, 10}, {48, 9}, {64, 8},
                               {40, 6}, {80, 12}, {56, 8}};  // 73 nodes

TEST(StepPeriod, FindsTheStepAfterTwoOfThem) {
  StepPeriod finder;
  auto [period, seen] = first_period(finder, kStep, 5);
  EXPECT_EQ(period, kStep.size());
  EXPECT_EQ(seen, 2 * kStep.size());
}

TEST(StepPeriod, AWarmUpBeforeTheLoopIsNotPartOfIt) {
  StepPeriod finder;
  EXPECT_EQ(first_period(finder, {{100, 9}, {24, 2}, {40, 3}}, 1).first, 0u);
  auto [period, seen] = first_period(finder, kStep, 5);
  EXPECT_EQ(period, kStep.size());
  EXPECT_EQ(seen, 2 * kStep.size());
}

TEST(StepPeriod, ABlockOfTooFewNodesIsNoPeriodButItsMultipleIs) {
  StepPeriod finder;  // one 3-node op repeated: the smallest block of 64 nodes or more is 22 ops
  auto [period, seen] = first_period(finder, {{40, 3}}, 100);
  EXPECT_EQ(period, 22u);
  EXPECT_EQ(seen, 44u);
}

TEST(StepPeriod, ASequenceThatDoesNotRepeatHasNoPeriod) {
  StepPeriod finder;
  for (size_t i = 1; i < 500; ++i) EXPECT_EQ(finder.add(8 * i, 1 + i % 7, 1), 0u);
}

TEST(StepPeriod, MinimumAndClear) {
  StepPeriod finder;
  EXPECT_EQ(first_period(finder, kStep, 5, kStep.size() + 1).first, 2 * kStep.size());
  finder.clear();
  EXPECT_EQ(first_period(finder, kStep, 1).first, 0u);  // what came before is forgotten
}

}  // namespace
}  // namespace torchtpu::engine
