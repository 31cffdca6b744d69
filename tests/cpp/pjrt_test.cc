#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "hlo/builder.h"
#include "pjrt/client.h"
#include "pjrt/device_description.h"
#include "cpu_client.h"

namespace torchtpu::pjrt {
namespace {

using testing::cpu_client;

const char kAddProgram[] = R"(module @m {
  func.func public @main(%a: tensor<3xf32>, %b: tensor<3xf32>) -> (tensor<3xf32>) {
    %0 = "stablehlo.add"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    "func.return"(%0) : (tensor<3xf32>) -> ()
  }
}
)";

std::vector<float> run_add(const Client& client, const Executable& exe, int device) {
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30};
  auto ba = client.buffer_from_host(a, PJRT_Buffer_Type_F32, {3}, client.device(device));
  auto bb = client.buffer_from_host(b, PJRT_Buffer_Type_F32, {3}, client.device(device));
  auto out = exe.execute({ba->raw(), bb->raw()}, client.device(device));
  EXPECT_EQ(out.size(), 1u);
  std::vector<float> host(3);
  out[0]->to_host(host.data(), host.size() * sizeof(float));
  return host;
}

TEST(Plugin, ReportsItsApiVersion) {
  auto plugin = Plugin::load(testing::cpu_plugin_path());
  EXPECT_EQ(plugin->api_major(), PJRT_API_MAJOR);
  EXPECT_EQ(plugin->api_version(), Plugin::header_version());
  EXPECT_EQ(Plugin::load(testing::cpu_plugin_path()), plugin) << "a plugin is loaded once";
}

TEST(Plugin, MissingFileIsAClearError) {
  try {
    Plugin::load("/nonexistent/plugin.so");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("cannot load the PJRT plugin '/nonexistent/plugin.so'"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("pip install xla-cpu-pjrt"), std::string::npos);
  }
}

TEST(Plugin, NewerMajorVersionIsRefused) {
  try {
    Plugin::load(TORCHTPU_FAKE_PLUGIN_MAJOR);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFailedPrecondition);
    EXPECT_NE(std::string(e.what()).find("implements PJRT C API 1.0"), std::string::npos);
  }
}

TEST(Plugin, NewerMinorVersionNamesTheRefusedStruct) {
  auto plugin = Plugin::load(TORCHTPU_FAKE_PLUGIN_MINOR);
  EXPECT_GT(plugin->api_minor(), PJRT_API_MINOR);
  try {
    Client client(plugin, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(what.find("older than the plugin's 0." + std::to_string(PJRT_API_MINOR + 34)),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("PJRT_Client_Create"), std::string::npos) << what;
  }
}

TEST(Client, ListsTheRequestedCpuDevices) {
  auto client = cpu_client();
  EXPECT_EQ(client->platform_name(), "cpu");
  ASSERT_EQ(client->device_count(), 2);
  EXPECT_EQ(client->device(1).id(), 1);
  EXPECT_FALSE(client->device(0).kind().empty());
}

TEST(Buffer, RoundTripsHostData) {
  auto client = cpu_client();
  int64_t data[4] = {1, -2, 3, 1LL << 40};
  auto buffer = client->buffer_from_host(data, PJRT_Buffer_Type_S64, {2, 2}, client->device(0));
  EXPECT_EQ(buffer->dimensions(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(buffer->element_type(), PJRT_Buffer_Type_S64);
  int64_t back[4] = {};
  buffer->to_host(back, sizeof(back));
  EXPECT_EQ(std::memcmp(data, back, sizeof(data)), 0);
  auto copy = buffer->copy_to(client->device(1));
  int64_t back2[4] = {};
  copy->to_host(back2, sizeof(back2));
  EXPECT_EQ(std::memcmp(data, back2, sizeof(data)), 0);
}

// On the CPU plugin a read copies the buffer's memory directly once the buffer is ready
// (Buffer::read_in_place): a program's output read right after its launch holds its final values,
// and every element width reads back as it was written.
TEST(Buffer, ReadsWaitForTheProgramAndKeepEveryWidth) {
  auto client = cpu_client();
  const char program[] = R"(module @m {
  func.func public @main(%a: tensor<1048576xf32>) -> (tensor<f32>, tensor<1048576xf32>) {
    %z = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %0 = "stablehlo.reduce"(%a, %z) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = "stablehlo.add"(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {dimensions = array<i64: 0>} : (tensor<1048576xf32>, tensor<f32>) -> tensor<f32>
    %1 = "stablehlo.exponential"(%a) : (tensor<1048576xf32>) -> tensor<1048576xf32>
    "func.return"(%0, %1) : (tensor<f32>, tensor<1048576xf32>) -> ()
  }
}
)";
  auto exe = client->compile(program, portable_compile_options());
  std::vector<float> ones(1 << 20, 1.0f);
  auto in = client->buffer_from_host(ones.data(), PJRT_Buffer_Type_F32, {1 << 20},
                                     client->device(0));
  for (int round = 0; round < 3; ++round) {
    auto out = exe->execute({in->raw()}, client->device(0));
    float sum = 0;
    out.at(0)->to_host(&sum, sizeof(sum));
    EXPECT_EQ(sum, 1048576.0f);
    std::vector<float> exp(ones.size());
    out.at(1)->to_host(exp.data(), exp.size() * sizeof(float));
    EXPECT_EQ(exp.front(), std::exp(1.0f));
    EXPECT_EQ(exp.back(), std::exp(1.0f));
  }
  bool flags[3] = {true, false, true};
  auto pred = client->buffer_from_host(flags, PJRT_Buffer_Type_PRED, {3}, client->device(0));
  bool flags_back[3] = {};
  pred->to_host(flags_back, sizeof(flags_back));
  EXPECT_EQ(std::memcmp(flags, flags_back, sizeof(flags)), 0);
  int8_t bytes[5] = {-128, -1, 0, 1, 127};
  auto s8 = client->buffer_from_host(bytes, PJRT_Buffer_Type_S8, {5}, client->device(1));
  int8_t bytes_back[5] = {};
  s8->to_host(bytes_back, sizeof(bytes_back));
  EXPECT_EQ(std::memcmp(bytes, bytes_back, sizeof(bytes)), 0);
  double scalar = -0.5;
  auto f64 = client->buffer_from_host(&scalar, PJRT_Buffer_Type_F64, {}, client->device(0));
  double scalar_back = 0;
  f64->to_host(&scalar_back, sizeof(scalar_back));
  EXPECT_EQ(scalar_back, -0.5);
}

TEST(Buffer, AsyncTransfersSignalTheirEvents) {
  auto client = cpu_client();
  std::vector<float> data(1 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  std::unique_ptr<Event> read;
  auto buffer = client->buffer_from_host_async(data.data(), PJRT_Buffer_Type_F32,
                                               {static_cast<int64_t>(data.size())},
                                               client->device(0), &read);
  ASSERT_NE(read, nullptr);
  read->await();
  std::vector<float> back(data.size());
  std::unique_ptr<Event> written = buffer->to_host_async(back.data(), back.size() * sizeof(float));
  std::atomic<int> calls{0};
  std::string error = "not called";
  written->on_ready([&](const std::string& e) {
    error = e;
    ++calls;
  });
  written->await();
  while (calls.load() == 0) std::this_thread::yield();  // the callback may follow the await
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(error, "");
  EXPECT_EQ(back, data);
}

TEST(Buffer, AdoptedHostMemoryIsHeldUntilTheBufferDies) {
  auto client = cpu_client();
  auto data = std::shared_ptr<float>(static_cast<float*>(std::aligned_alloc(64, 1024 * 4)),
                                     [](float* p) { std::free(p); });
  for (int i = 0; i < 1024; ++i) data.get()[i] = static_cast<float>(i);
  std::weak_ptr<float> watch = data;
  auto buffer = client->buffer_adopting_host(data.get(), PJRT_Buffer_Type_F32, {1024},
                                             client->device(0), data);
  data.reset();
  // The CPU plugin uses aligned host memory in place: it is held, and the buffer may not be
  // donated, while the buffer lives.
  EXPECT_FALSE(watch.expired());
  EXPECT_TRUE(buffer->borrows_host_memory());
  std::vector<float> back(1024);
  buffer->to_host(back.data(), back.size() * sizeof(float));
  EXPECT_EQ(back[1023], 1023.0f);
  buffer.reset();  // lets the memory go (on a plugin thread, maybe a moment later)
  for (int i = 0; i < 1000 && !watch.expired(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(watch.expired());
}

TEST(Executable, CompilesAndRunsOnEveryDevice) {
  auto client = cpu_client();
  auto exe = client->compile(kAddProgram, portable_compile_options());
  EXPECT_EQ(exe->num_outputs(), 1u);
  for (int device = 0; device < 2; ++device) {
    EXPECT_EQ(run_add(*client, *exe, device), (std::vector<float>{11, 22, 33}));
  }
}

TEST(Executable, BadProgramIsAnErrorWithThePluginMessage) {
  auto client = cpu_client();
  try {
    client->compile("module { this is not mlir }", portable_compile_options());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PJRT_Client_Compile failed"), std::string::npos);
  }
}

TEST(Executable, SerializeRoundTrips) {
  auto client = cpu_client();
  auto exe = client->compile(kAddProgram, portable_compile_options());
  std::string bytes = exe->serialize();
  ASSERT_FALSE(bytes.empty());
  auto loaded = client->deserialize(bytes);
  EXPECT_EQ(run_add(*client, *loaded, 0), (std::vector<float>{11, 22, 33}));
}

TEST(Device, MemoryStatsAreOptional) {
  auto client = cpu_client();
  // The CPU plugin has no allocator statistics; either answer must come back without throwing.
  auto stats = client->device(0).memory_stats();
  if (stats) EXPECT_GE(stats->bytes_in_use, 0);
}

PJRT_NamedValue named(const std::string& name, PJRT_NamedValue_Type type) {
  PJRT_NamedValue v{};
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = name.data();
  v.name_size = name.size();
  v.type = type;
  v.value_size = 1;
  return v;
}

TEST(DeviceDescription, ReadsEveryNamedValueType) {
  const std::string names[] = {"coords", "core_on_chip", "kind", "ratio", "fast"};
  const int64_t coords[] = {1, 0, 2};
  const char kind[] = "TPU v5 lite";
  PJRT_NamedValue values[5] = {
      named(names[0], PJRT_NamedValue_kInt64List), named(names[1], PJRT_NamedValue_kInt64),
      named(names[2], PJRT_NamedValue_kString), named(names[3], PJRT_NamedValue_kFloat),
      named(names[4], PJRT_NamedValue_kBool)};
  values[0].int64_array_value = coords;
  values[0].value_size = 3;
  values[1].int64_value = 1;
  values[2].string_value = kind;
  values[2].value_size = sizeof(kind) - 1;
  values[3].float_value = 0.5f;
  values[4].bool_value = true;
  Attributes attributes = read_named_values(values, 5);
  ASSERT_EQ(attributes.size(), 5u);
  EXPECT_EQ(std::get<std::vector<int64_t>>(attributes.at("coords")),
            (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(std::get<int64_t>(attributes.at("core_on_chip")), 1);
  EXPECT_EQ(std::get<std::string>(attributes.at("kind")), "TPU v5 lite");
  EXPECT_EQ(std::get<float>(attributes.at("ratio")), 0.5f);
  EXPECT_EQ(std::get<bool>(attributes.at("fast")), true);
}

TEST(DeviceDescription, UnknownValueTypeNamesTheAttribute) {
  const std::string name = "future";
  PJRT_NamedValue value = named(name, static_cast<PJRT_NamedValue_Type>(99));
  try {
    read_named_values(&value, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'future' with unknown value type 99"), std::string::npos)
        << e.what();
  }
}

TEST(DeviceDescription, CpuPluginDescribesEachDevice) {
  auto client = cpu_client();
  for (int i = 0; i < client->device_count(); ++i) {
    DeviceDescription d = describe(client->plugin(), client->device(i));
    EXPECT_EQ(d.id, client->device(i).id());
    EXPECT_EQ(d.kind, client->device(i).kind());
    EXPECT_EQ(d.process_index, 0);
    EXPECT_FALSE(d.debug_string.empty());
    EXPECT_FALSE(d.to_string.empty());
    ASSERT_TRUE(d.local_hardware_id.has_value());
    EXPECT_EQ(*d.local_hardware_id, i);  // its index among this process's CPU devices
    EXPECT_NE(d.to_string.find(std::to_string(d.id)), std::string::npos) << d.to_string;
  }
}

}  // namespace
}  // namespace torchtpu::pjrt
