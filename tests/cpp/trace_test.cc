// The profiler's trace sink: what it records while a session is on, and nothing while it is off.
#include "engine/trace.h"

#include <gtest/gtest.h>

#include "engine/program.h"
#include "engine/runtime.h"
#include "plugin_path.h"

namespace torchtpu::engine {
namespace {

using hlo::ElementType;

TEST(Trace, RecordsNothingWhileOff) {
  EXPECT_FALSE(trace::enabled());
  EXPECT_EQ(trace::launch_time(), 0);
  { trace::Range range(trace::Kind::kCompile, -1); }
  trace::launched(trace::launch_time(), 0, nullptr);
  trace::start();
  EXPECT_TRUE(trace::enabled());
  EXPECT_TRUE(trace::stop().empty());
  EXPECT_FALSE(trace::enabled());
}

TEST(Trace, IntervalsCarryTheOpAndTheRecordFunctionRangesAroundThem) {
  trace::start();
  trace::push_correlation(3, /*user=*/true);
  trace::push_correlation(4, /*user=*/true);
  trace::push_correlation(7, /*user=*/false);
  {
    trace::Range flush(trace::Kind::kFlush, 0, 5);
    trace::launched(trace::launch_time(), 0, nullptr);
  }
  trace::pop_correlation(false);
  trace::pop_correlation(true);
  trace::pop_correlation(true);
  trace::pop_correlation(true);  // more pops than pushes (a session started inside an op)
  { trace::Range after(trace::Kind::kCopyToHost, 0, 16); }
  std::vector<trace::Interval> got = trace::stop();
  ASSERT_EQ(got.size(), 3u);
  const trace::Interval& execute = got[0];
  EXPECT_EQ(execute.kind, trace::Kind::kExecute);
  EXPECT_EQ(execute.name, "fused program (5 nodes)");
  EXPECT_EQ(execute.correlation, 7u);
  EXPECT_EQ(execute.user_ranges, (std::vector<uint64_t>{3, 4}));
  const trace::Interval& flush = got[1];
  EXPECT_EQ(flush.kind, trace::Kind::kFlush);
  EXPECT_EQ(flush.amount, 5);
  EXPECT_LE(flush.start_ns, execute.start_ns);
  EXPECT_GE(flush.end_ns, execute.end_ns);
  const trace::Interval& copy = got[2];
  EXPECT_EQ(copy.correlation, 0u);
  EXPECT_TRUE(copy.user_ranges.empty());
  EXPECT_EQ(copy.amount, 16);
}

TEST(Trace, AnExecutionEndsAtItsCompletionEvent) {
  static bool configured = [] {
    configure_runtime(RuntimeConfig{testing::cpu_plugin_path(), "cpu", {}, ""});
    return true;
  }();
  (void)configured;
  std::vector<float> values(1031, 1.0f);  // a size no other test uses: the program compiles
  trace::start();
  auto s = std::make_unique<StorageHandle>(0, values.size() * sizeof(float));
  s->set_buffer(Runtime::get().upload(values.data(), ElementType::kF32, {1031}, 0),
                ElementType::kF32);
  Program p(0);
  TensorView v{s.get(), ElementType::kF32, {1031}, {1}, 0};
  lowering::Attrs attrs = lowering::Attrs().set_type("type", ElementType::kF32);
  attrs.set("shape", std::vector<int64_t>{1031});
  p.write(v, p.apply("exp", {p.read(v)}, attrs));
  p.run();
  Runtime::get().synchronize(0);
  std::vector<trace::Interval> got = trace::stop();
  std::vector<trace::Kind> kinds;
  for (const trace::Interval& i : got) kinds.push_back(i.kind);
  EXPECT_EQ(kinds, (std::vector<trace::Kind>{trace::Kind::kCopyToDevice, trace::Kind::kCompile,
                                             trace::Kind::kExecute}));
  EXPECT_EQ(got[0].amount, 1031 * 4);
  const trace::Interval& execute = got[2];
  EXPECT_GE(execute.start_ns, got[1].end_ns);  // launched after its compile
  EXPECT_GT(execute.end_ns, execute.start_ns);
}

}  // namespace
}  // namespace torchtpu::engine
