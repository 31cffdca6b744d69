// LaunchMarks: a mark is done once every launch started before it finished, in any order.
#include "engine/launch_marks.h"

#include <gtest/gtest.h>

#include <thread>

namespace torchtpu::engine {
namespace {

TEST(LaunchMarks, MarkOnAnIdleDeviceIsDoneAtOnce) {
  LaunchMarks marks(2);
  EXPECT_TRUE(marks.mark(0)->done());
  marks.start(1);
  EXPECT_TRUE(marks.mark(0)->done());  // the other device's work is not covered
  EXPECT_FALSE(marks.mark(1)->done());
}

TEST(LaunchMarks, MarkWaitsForEveryEarlierLaunchInAnyOrder) {
  LaunchMarks marks(1);
  uint64_t a = marks.start(0), b = marks.start(0);
  auto both = marks.mark(0);
  uint64_t c = marks.start(0);
  auto all = marks.mark(0);
  marks.finished(0, b);
  EXPECT_FALSE(both->done());
  marks.finished(0, c);
  EXPECT_FALSE(all->done());
  marks.finished(0, a);
  EXPECT_TRUE(both->done());
  EXPECT_TRUE(all->done());
  EXPECT_GE(both->elapsed_ms(*all), 0.0);
}

TEST(LaunchMarks, FinishedThroughCompletesEarlierMarksAndIgnoresLateCallbacks) {
  LaunchMarks marks(1);
  uint64_t a = marks.start(0);
  auto first = marks.mark(0);
  uint64_t b = marks.start(0);
  auto second = marks.mark(0);
  marks.finished_through(0, a);
  EXPECT_TRUE(first->done());
  EXPECT_FALSE(second->done());
  marks.finished(0, a);  // the callback arrives after synchronize: no effect
  EXPECT_FALSE(second->done());
  marks.finished(0, b);
  EXPECT_TRUE(second->done());
}

TEST(LaunchMarks, WaitReturnsWhenAnotherThreadFinishesTheLaunch) {
  LaunchMarks marks(1);
  uint64_t a = marks.start(0);
  auto m = marks.mark(0);
  std::thread t([&] { marks.finished(0, a); });
  m->wait();
  t.join();
  EXPECT_TRUE(m->done());
}

}  // namespace
}  // namespace torchtpu::engine
