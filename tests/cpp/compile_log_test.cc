#include "engine/compile_log.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace torchtpu::engine {
namespace {

std::vector<NodeDescription> program(const std::string& sizes, const std::string& type = "f32") {
  return {{"argument", {{"shape", "tensor<8xf32>"}}},
          {"view_read", {{"type", type}, {"sizes", sizes}, {"strides", "[4,1]"}}},
          {"exp", {}},
          {"view_write", {{"sizes", sizes}}}};
}

std::vector<std::string> warnings;
std::string here() { return "train.py:12"; }

TEST(CompileLog, EachCompileSaysWhatDifferedFromTheNearestProgramOfItsOps) {
  clear_compile_log();
  set_python_location(here);
  warnings.clear();
  set_compile_warning([](const std::string& m) { warnings.push_back(m); }, 2);
  log_compile(program("[2,4]"));
  log_compile(program("[2,5]"));
  log_compile(program("[2,5]", "f64"));
  EXPECT_TRUE(warnings.empty());  // said once the Python line is known
  locate_compiles();
  log_compile({{"view_read", {{"sizes", "[3]"}}}, {"tanh", {}}});
  std::vector<CompileRecord> log = compile_log();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[0].ops, "exp");
  EXPECT_EQ(log[0].reason, "the first program of these ops");
  EXPECT_EQ(log[1].reason, "input 0: sizes [2,5] instead of [2,4]; view_write (node 3): sizes "
                           "[2,5] instead of [2,4]");
  // The nearest of the two before it: the one of the same sizes.
  EXPECT_EQ(log[2].reason, "input 0: type f64 instead of f32");
  EXPECT_EQ(log[2].same_ops, 3);
  EXPECT_EQ(log[2].where, "train.py:12");
  EXPECT_EQ(log[3].ops, "tanh");
  EXPECT_EQ(log[3].where, "");  // not located yet
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("compiled 3 programs of the same ops (exp)"), std::string::npos);
  EXPECT_NE(warnings[0].find("(at train.py:12)"), std::string::npos);
  log_compile(program("[2,6]"));
  locate_compiles();
  EXPECT_EQ(warnings.size(), 1u);  // once per op sequence
  set_compile_warning(nullptr, 0);
  set_python_location(nullptr);
  clear_compile_log();
}

}  // namespace
}  // namespace torchtpu::engine
