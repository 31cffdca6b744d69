// Programs of view reads/writes and elementwise rules, run on the CPU plugin and checked against
// a direct strided computation on the host.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "engine/address_space.h"
#include "engine/device_asserts.h"
#include "engine/eager.h"
#include "engine/program.h"
#include "engine/runtime.h"
#include "lowering/registry.h"
#include "plugin_path.h"

namespace torchtpu::engine {
namespace {

using hlo::ElementType;

void start_runtime() {
  static bool configured = [] {
    configure_runtime(RuntimeConfig{testing::cpu_plugin_path(), "cpu", {}, ""});
    return true;
  }();
  (void)configured;
}

std::unique_ptr<StorageHandle> storage_with(const std::vector<float>& data) {
  start_runtime();
  auto s = std::make_unique<StorageHandle>(0, data.size() * sizeof(float));
  s->set_buffer(Runtime::get().upload(data.data(), ElementType::kF32,
                                      {static_cast<int64_t>(data.size())}, 0),
                ElementType::kF32);
  return s;
}

template <typename T>
std::vector<T> contents(const StorageHandle& s, ElementType type) {
  std::vector<T> host(s.numel(type));
  s.buffer()->to_host(host.data(), host.size() * sizeof(T));
  return host;
}

std::vector<float> strided_read(const std::vector<float>& flat, const TensorView& v) {
  std::vector<float> out;
  std::vector<int64_t> index(v.sizes.size(), 0);
  for (int64_t n = 0; n < v.numel(); ++n) {
    int64_t at = v.offset;
    for (size_t k = 0; k < index.size(); ++k) at += index[k] * v.strides[k];
    out.push_back(flat[at]);
    for (size_t k = index.size(); k-- > 0;) {
      if (++index[k] < v.sizes[k]) break;
      index[k] = 0;
    }
  }
  return out;
}

std::vector<float> read_view(const TensorView& view) {
  Program p(0);
  p.result(p.read(view));
  auto out = p.run();
  std::vector<float> host(view.numel());
  out.at(0)->to_host(host.data(), host.size() * sizeof(float));
  return host;
}

struct Geometry {
  std::vector<int64_t> sizes, strides;
  int64_t offset;
};

class ViewRead : public ::testing::TestWithParam<Geometry> {};

TEST_P(ViewRead, MatchesAStridedHostRead) {
  std::vector<float> flat(64);
  std::iota(flat.begin(), flat.end(), 0.0f);
  auto s = storage_with(flat);
  const Geometry& g = GetParam();
  TensorView view{s.get(), ElementType::kF32, g.sizes, g.strides, g.offset};
  EXPECT_EQ(read_view(view), strided_read(flat, view));
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ViewRead,
    ::testing::Values(Geometry{{64}, {1}, 0},                // the whole storage
                      Geometry{{4, 4}, {4, 1}, 3},           // contiguous range
                      Geometry{{4, 4}, {1, 4}, 0},           // transpose
                      Geometry{{3, 2}, {8, 2}, 5},           // strided slice
                      Geometry{{2, 3, 4}, {1, 8, 2}, 1},     // permuted and strided
                      Geometry{{5, 3}, {0, 1}, 60},          // expand, ends at the storage end
                      Geometry{{1, 4, 1}, {99, 1, 7}, 10},   // size-1 dims with odd strides
                      Geometry{{}, {}, 17},                  // a 0-d element
                      Geometry{{6, 3}, {2, 3}, 0},           // overlapping: a gather
                      Geometry{{4, 5}, {5, 6}, 0}));         // interleaved: a gather

TEST(ViewWrite, WritesThroughATransposedView) {
  std::vector<float> flat(12, -1.0f);
  auto s = storage_with(flat);
  std::vector<float> values{0, 1, 2, 3, 4, 5};
  Program p(0);
  auto src = Runtime::get().upload(values.data(), ElementType::kF32, {3, 2}, 0);
  int v = p.argument(src, hlo::Shape{ElementType::kF32, {3, 2}});
  p.write(TensorView{s.get(), ElementType::kF32, {3, 2}, {1, 4}, 1}, v);
  p.run();
  std::vector<float> expected(12, -1.0f);
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) expected[1 + i + 4 * j] = values[i * 2 + j];
  }
  EXPECT_EQ(contents<float>(*s, ElementType::kF32), expected);
}

class ViewWrite : public ::testing::TestWithParam<Geometry> {};

// Writing 100, 101, ... through the view changes exactly the view's elements, on a storage that
// has contents and on one that has none (zeros).
TEST_P(ViewWrite, MatchesAStridedHostWrite) {
  const Geometry& g = GetParam();
  for (bool written : {true, false}) {
    std::vector<float> flat(64);
    std::iota(flat.begin(), flat.end(), 0.0f);
    if (!written) std::fill(flat.begin(), flat.end(), 0.0f);
    std::unique_ptr<StorageHandle> s = storage_with(flat);
    if (!written) s = std::make_unique<StorageHandle>(0, 64 * sizeof(float));
    TensorView view{s.get(), ElementType::kF32, g.sizes, g.strides, g.offset};
    std::vector<float> values(view.numel());
    std::iota(values.begin(), values.end(), 100.0f);
    Program p(0);
    int v = p.argument(Runtime::get().upload(values.data(), ElementType::kF32, g.sizes, 0),
                       hlo::Shape{ElementType::kF32, g.sizes});
    p.write(view, v);
    p.run();
    std::vector<float> expected = flat;
    std::vector<int64_t> index(g.sizes.size(), 0);
    for (int64_t n = 0; n < view.numel(); ++n) {
      int64_t at = g.offset;
      for (size_t k = 0; k < index.size(); ++k) at += index[k] * g.strides[k];
      expected[at] = values[n];
      for (size_t k = index.size(); k-- > 0;) {
        if (++index[k] < g.sizes[k]) break;
        index[k] = 0;
      }
    }
    EXPECT_EQ(contents<float>(*s, ElementType::kF32), expected) << "written " << written;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ViewWrite,
    ::testing::Values(Geometry{{8, 8}, {1, 8}, 0},           // a permutation of the whole
                      Geometry{{2, 4, 8}, {8, 16, 1}, 0},    // another one
                      Geometry{{4, 4}, {1, 4}, 3},           // transposed, offset
                      Geometry{{3, 2}, {8, 2}, 5},           // strided slice
                      Geometry{{2, 3, 4}, {1, 8, 2}, 1},     // permuted and strided
                      Geometry{{4, 3}, {16, 1}, 13},         // rows whose block ends past the end
                      Geometry{{1, 4, 1}, {99, 1, 7}, 10}));  // size-1 dims with odd strides

TEST(ViewWrite, ContiguousRangeAndUnwrittenStorage) {
  start_runtime();
  StorageHandle s(0, 8 * sizeof(int32_t));
  std::vector<int32_t> values{7, 8, 9};
  Program p(0);
  int v = p.argument(Runtime::get().upload(values.data(), ElementType::kS32, {3}, 0),
                     hlo::Shape{ElementType::kS32, {3}});
  p.write(TensorView{&s, ElementType::kS32, {3}, {1}, 2}, v);
  p.run();
  EXPECT_EQ(contents<int32_t>(s, ElementType::kS32),
            (std::vector<int32_t>{0, 0, 7, 8, 9, 0, 0, 0}));
}

TEST(ViewRead, ReinterpretsBytesOfAnotherType) {
  auto s = storage_with({1.0f, -2.0f});
  TensorView bytes{s.get(), ElementType::kU8, {8}, {1}, 0};
  Program p(0);
  p.result(p.read(bytes));
  auto out = p.run();
  uint8_t host[8];
  out.at(0)->to_host(host, 8);
  float expected[2] = {1.0f, -2.0f};
  EXPECT_EQ(std::memcmp(host, expected, 8), 0);
}

TEST(Program, SameStructureHitsTheCache) {
  auto a = storage_with({1, 2, 3});
  auto b = storage_with({4, 5, 6});
  auto before = Runtime::get().executables().stats();
  for (int i = 0; i < 3; ++i) {
    Program p(0);
    TensorView va{a.get(), ElementType::kF32, {3}, {1}, 0};
    TensorView vb{b.get(), ElementType::kF32, {3}, {1}, 0};
    int sum = p.apply("add", {p.read(va), p.read(vb)},
                      lowering::Attrs().set_type("type", ElementType::kF32).set("shape",
                                                                              std::vector<int64_t>{3}));
    p.write(va, sum);
    p.run();
  }
  auto after = Runtime::get().executables().stats();
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(after.hits - before.hits, 2);
  EXPECT_EQ(contents<float>(*a, ElementType::kF32), (std::vector<float>{13, 17, 21}));
}

// Reading a view again while its storage is unchanged is the value read before, and reading the
// dense view just written is the written value: no node either time. Another view, a write in
// between, or a write through a strided view reads through a node again; the values stay right.
TEST(Program, ReadsOfAViewAlreadyReadOrWrittenAreNotRecordedAgain) {
  auto a = storage_with({1, 2, 3, 4, 5, 6});
  auto out = storage_with(std::vector<float>(6, 0));
  TensorView whole{a.get(), ElementType::kF32, {2, 3}, {3, 1}, 0};
  TensorView row{a.get(), ElementType::kF32, {3}, {1}, 3};
  TensorView column{a.get(), ElementType::kF32, {2}, {3}, 1};
  auto attrs = [](std::vector<int64_t> shape) {
    return lowering::Attrs().set_type("type", ElementType::kF32).set("shape", std::move(shape));
  };
  Program p(0);
  int first = p.read(whole);
  size_t nodes = p.size();
  EXPECT_EQ(p.read(whole), first);
  EXPECT_EQ(p.size(), nodes);
  EXPECT_NE(p.read(row), first);  // another view of the same storage
  EXPECT_GT(p.size(), nodes);
  int doubled = p.apply("add", {first, first}, attrs({2, 3}));
  p.write(whole, doubled);
  nodes = p.size();
  EXPECT_EQ(p.read(whole), doubled);  // what was just written through it
  EXPECT_EQ(p.size(), nodes);
  int r = p.read(row);  // stale before the write: read again
  EXPECT_NE(r, doubled);
  int c = p.read(column);
  p.write(column, p.apply("neg", {c}, attrs({2})));  // strided: no element twice, but not dense
  nodes = p.size();
  int again = p.read(column);
  EXPECT_GT(p.size(), nodes);
  p.write(TensorView{out.get(), ElementType::kF32, {3}, {1}, 0}, r);
  p.write(TensorView{out.get(), ElementType::kF32, {2}, {1}, 3}, again);
  p.run();
  EXPECT_EQ(contents<float>(*a, ElementType::kF32), (std::vector<float>{2, -4, 6, 8, -10, 12}));
  EXPECT_EQ(contents<float>(*out, ElementType::kF32), (std::vector<float>{8, 10, 12, -4, -10, 0}));
}

// Negates `from` into `to` through the eager modes' recording path.
void record_negate(StorageHandle& from, StorageHandle& to) {
  Recording r(0);
  TensorView in{&from, ElementType::kF32, {4}, {1}, 0}, out{&to, ElementType::kF32, {4}, {1}, 0};
  lowering::Attrs attrs;
  attrs.set_type("type", ElementType::kF32).set("shape", std::vector<int64_t>{4});
  r.program().write(out, r.program().apply("neg", {r.program().read(in)}, attrs));
  r.finish();
}

// check_lowering judges each case by itself: a refusal is raised at every call, and the same op
// on other shapes or attributes lowers.
TEST(Program, CheckLoweringRefusesEveryTimeAndJudgesEachCase) {
  std::vector<hlo::Shape> shapes{{ElementType::kPred, {3}}, {ElementType::kPred, {3}}};
  auto attrs = [](ElementType compute) {
    return lowering::Attrs()
        .set_type("type", compute)
        .set("shape", std::vector<int64_t>{3})
        .set_type("compute_type", compute)
        .set("rounding_mode", std::string("floor"));
  };
  for (int i = 0; i < 2; ++i) {
    EXPECT_THROW(Program::check_lowering("div", shapes, attrs(ElementType::kPred), 1),
                 lowering::Refused);
  }
  std::vector<hlo::Shape> floats{{ElementType::kF32, {3}}, {ElementType::kF32, {3}}};
  for (int i = 0; i < 2; ++i) {
    EXPECT_NO_THROW(Program::check_lowering("div", floats, attrs(ElementType::kF32), 1));
  }
  EXPECT_THROW(Program::check_lowering("div", shapes, attrs(ElementType::kPred), 1),
               lowering::Refused);
}

TEST(Capture, RecordsOneProgramAndSaysWhatItBoundAndWrote) {
  auto in = storage_with({1, 2, 3, 4});
  begin_capture(0);
  EXPECT_TRUE(capturing());
  auto made = std::make_unique<StorageHandle>(0, 4 * sizeof(float));
  EXPECT_GE(made->serial(), capture_serial());
  EXPECT_LT(in->serial(), capture_serial());
  record_negate(*in, *made);
  EXPECT_FALSE(made->buffer());  // recorded, not run
  std::string broken;
  std::unique_ptr<Program> program = end_capture(&broken);
  EXPECT_FALSE(capturing());
  ASSERT_TRUE(program && broken.empty());
  Launch launch;
  program->run(&launch);
  ASSERT_EQ(launch.argument_storages, std::vector<StorageHandle*>{in.get()});
  ASSERT_EQ(launch.written, std::vector<StorageHandle*>{made.get()});
  EXPECT_EQ(contents<float>(*made, ElementType::kF32), (std::vector<float>{-1, -2, -3, -4}));
  // The executable runs again on other buffers.
  std::vector<float> other{5, 6, 7, 8};
  auto buffer = Runtime::get().upload(other.data(), ElementType::kF32, {4}, 0);
  auto out = launch.executable->execute({buffer->raw()}, Runtime::get().device(0));
  std::vector<float> host(4);
  out.at(0)->to_host(host.data(), 4 * sizeof(float));
  EXPECT_EQ(host, (std::vector<float>{-5, -6, -7, -8}));
}

TEST(Capture, ASyncPointBreaksItAndTheWorkStillRuns) {
  auto in = storage_with({1, 2, 3, 4});
  begin_capture(0);
  StorageHandle made(0, 4 * sizeof(float));
  record_negate(*in, made);
  capture_breaks_because("a read to the host");
  flush(0);
  std::string broken;
  EXPECT_EQ(end_capture(&broken), nullptr);
  EXPECT_EQ(broken, "a read to the host");
  EXPECT_EQ(contents<float>(made, ElementType::kF32), (std::vector<float>{-1, -2, -3, -4}));
}

// A storage that dies while a deferred program holds it is forgotten by that program alone: no
// longer an argument it binds nor an output it writes, while the storages beside it stay both.
TEST(Capture, AStorageThatDiesMeanwhileIsForgottenAndTheOthersKept) {
  std::vector<std::unique_ptr<StorageHandle>> in, made;
  begin_capture(0);
  for (float k = 0; k < 3; ++k) {
    in.push_back(storage_with({k, k + 1, k + 2, k + 3}));
    made.push_back(std::make_unique<StorageHandle>(0, 4 * sizeof(float)));
    record_negate(*in.back(), *made.back());
  }
  in[1].reset();
  made[1].reset();
  std::string broken;
  std::unique_ptr<Program> program = end_capture(&broken);
  ASSERT_TRUE(program && broken.empty());
  Launch launch;
  program->run(&launch);
  EXPECT_EQ(launch.argument_storages, (std::vector<StorageHandle*>{in[0].get(), nullptr,
                                                                   in[2].get()}));
  EXPECT_EQ(launch.written, (std::vector<StorageHandle*>{made[0].get(), made[2].get()}));
  EXPECT_EQ(contents<float>(*made[0], ElementType::kF32), (std::vector<float>{0, -1, -2, -3}));
  EXPECT_EQ(contents<float>(*made[2], ElementType::kF32), (std::vector<float>{-2, -3, -4, -5}));
}

// Records and runs s = -s (a 4-float storage) in `p`.
void negate_in_place(Program& p, StorageHandle& s) {
  lowering::Attrs attrs;
  attrs.set_type("type", ElementType::kF32).set("shape", std::vector<int64_t>{4});
  TensorView v{&s, ElementType::kF32, {4}, {1}, 0};
  p.write(v, p.apply("neg", {p.read(v)}, attrs));
  p.run();
}

TEST(Donation, ARewrittenStoragesOnlyBufferIsReusedAndASharedOneIsNot) {
  auto s = storage_with({1, 2, 3, 4});
  std::weak_ptr<pjrt::Buffer> old = s->buffer();
  {
    Program p(0);
    negate_in_place(p, *s);
    ASSERT_FALSE(old.expired());  // the program still holds its arguments
    EXPECT_TRUE(old.lock()->is_deleted());
  }
  EXPECT_EQ(contents<float>(*s, ElementType::kF32), (std::vector<float>{-1, -2, -3, -4}));

  std::shared_ptr<pjrt::Buffer> kept = s->buffer();  // another holder: no donation
  {
    Program p(0);
    negate_in_place(p, *s);
  }
  EXPECT_FALSE(kept->is_deleted());
  std::vector<float> host(4);
  kept->to_host(host.data(), host.size() * sizeof(float));
  EXPECT_EQ(host, (std::vector<float>{-1, -2, -3, -4}));
  EXPECT_EQ(contents<float>(*s, ElementType::kF32), (std::vector<float>{1, 2, 3, 4}));
}

// Records out = in * scalar (both f32 [4]) as Strict's own program, saying what it bound.
void record_scale(StorageHandle& in, StorageHandle& out, float scalar, Launch* launch) {
  Recording r(0);
  Program& p = r.program();
  TensorView from{&in, ElementType::kF32, {4}, {1}, 0}, to{&out, ElementType::kF32, {4}, {1}, 0};
  lowering::Attrs attrs;
  attrs.set_type("type", ElementType::kF32)
      .set("shape", std::vector<int64_t>{4})
      .set_type("compute_type", ElementType::kF32);
  p.write(to, p.apply("mul", {p.read(from), p.scalar(ElementType::kF32, &scalar)}, attrs));
  r.finish(launch);
}

// An op Strict ran once runs again from what its launch bound, on other storages and scalars,
// without being recorded; an in-place one gives over its storage's old buffer only when nothing
// else holds it.
TEST(OpReplay, RunsAnOpAgainOnOtherStoragesAndScalars) {
  start_runtime();
  EagerMode mode = eager_mode();
  set_eager_mode(EagerMode::kStrict);
  auto a = storage_with({1, 2, 3, 4});
  StorageHandle out(0, 4 * sizeof(float));  // no contents yet, as an op's new output
  Launch launch;
  record_scale(*a, out, 2, &launch);
  OpReplay op;
  EXPECT_FALSE(OpReplay::of(launch, {a.get()}, 1, &op));  // the output's storage is not listed
  EXPECT_FALSE(OpReplay::of(launch, {a.get(), &out}, 0, &op));  // nor is the scalar
  ASSERT_TRUE(OpReplay::of(launch, {a.get(), &out}, 1, &op));
  EXPECT_EQ(op.arguments, (std::vector<int>{0, -1}));
  EXPECT_EQ(op.written, (std::vector<int>{1}));
  EXPECT_TRUE(op.donated.empty());

  auto b = storage_with({5, 6, 7, 8});
  StorageHandle out2(0, 4 * sizeof(float));
  float three = 3;
  replay(0, op, {b.get(), &out2}, {Runtime::get().scalar(ElementType::kF32, &three, 0)});
  EXPECT_EQ(contents<float>(out2, ElementType::kF32), (std::vector<float>{15, 18, 21, 24}));
  EXPECT_EQ(contents<float>(out, ElementType::kF32), (std::vector<float>{2, 4, 6, 8}));

  // In place: the storage is read and rewritten, its old buffer one the program may take over.
  Launch in_place;
  record_scale(*a, *a, 2, &in_place);
  ASSERT_TRUE(OpReplay::of(in_place, {a.get()}, 1, &op));
  EXPECT_EQ(op.donated, (std::vector<int64_t>{0}));
  uint64_t donated = donated_buffers();
  float half = 0.5;
  std::shared_ptr<pjrt::Buffer> scalar = Runtime::get().scalar(ElementType::kF32, &half, 0);
  replay(0, op, {b.get()}, {scalar});  // b's buffer has no other holder
  EXPECT_EQ(donated_buffers(), donated + 1);
  EXPECT_EQ(contents<float>(*b, ElementType::kF32), (std::vector<float>{2.5, 3, 3.5, 4}));
  std::shared_ptr<pjrt::Buffer> held = b->buffer();
  replay(0, op, {b.get()}, {scalar});
  EXPECT_EQ(donated_buffers(), donated + 1);
  EXPECT_FALSE(held->is_deleted());
  std::vector<float> host(4);
  held->to_host(host.data(), host.size() * sizeof(float));
  EXPECT_EQ(host, (std::vector<float>{2.5, 3, 3.5, 4}));
  EXPECT_EQ(contents<float>(*b, ElementType::kF32), (std::vector<float>{1.25, 1.5, 1.75, 2}));
  set_eager_mode(mode);
}

// Checks `values` against [0, 3) in a program of its own, failing check `id`.
void run_range_assert(const std::vector<int64_t>& values, int64_t id, const int64_t* ignore = nullptr) {
  start_runtime();
  StorageHandle s(0, values.size() * sizeof(int64_t));
  s.set_buffer(Runtime::get().upload(values.data(), ElementType::kS64,
                                     {static_cast<int64_t>(values.size())}, 0),
               ElementType::kS64);
  Program p(0);
  TensorView v{&s, ElementType::kS64, {static_cast<int64_t>(values.size())}, {1}, 0};
  record_range_assert(p, p.read(v), 0, 3, ignore, id);
  p.run();
}

TEST(DeviceAsserts, TheFirstFailedCheckIsRaisedAtTheNextWaitAndOnlyOnce) {
  int64_t first = assert_id({true, "first: index {} is out of range"});
  int64_t second = assert_id({false, "second: {}"});
  EXPECT_EQ(assert_id({true, "first: index {} is out of range"}), first);
  EXPECT_NE(first, second);
  run_range_assert({0, 2, -1}, second, nullptr);  // kept over what follows: it failed first
  run_range_assert({7, 1, 5}, first, nullptr);
  try {
    Runtime::get().synchronize(0);
    FAIL() << "synchronize did not raise the failed check";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "second: -1");
  }
  Runtime::get().synchronize(0);  // reported once
  run_range_assert({7, 1, 5}, first, nullptr);
  try {
    raise_failed_asserts(0);
    FAIL() << "the failed check was not raised";
  } catch (const std::out_of_range& e) {
    EXPECT_EQ(std::string(e.what()), "first: index 7 is out of range");  // the largest bad value
  }
  int64_t ignore = 9;
  run_range_assert({0, 9, 2}, first, &ignore);  // in range, or the ignored value
  EXPECT_NO_THROW(Runtime::get().synchronize(0));
}

TEST(AddressSpace, RangesDoNotOverlapAndAreReused) {
  void* a = reserve_address_range(100);
  void* b = reserve_address_range(100);
  EXPECT_TRUE(is_device_address(a));
  EXPECT_GE(std::abs(static_cast<char*>(a) - static_cast<char*>(b)), 100);
  release_address_range(a, 100);
  EXPECT_EQ(reserve_address_range(90), a);
  EXPECT_EQ(reserve_address_range(0), nullptr);
  int local = 0;
  EXPECT_FALSE(is_device_address(&local));
}

TEST(Runtime, StartsWithTheConfiguredPlugin) {
  start_runtime();
  EXPECT_GE(Runtime::device_count_or_zero(), 1);
  EXPECT_NE(Runtime::get().device_name().find("XLA CPU (PJRT 0."), std::string::npos);
}

}  // namespace
}  // namespace torchtpu::engine
