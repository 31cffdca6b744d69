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
  EXPECT_NE(warnings[0].find("compiling too often at train.py:12: 3 programs; dimension 1 of "
                             "input 0 of exp took 2 sizes"),
            std::string::npos)
      << warnings[0];
  log_compile(program("[2,6]"));
  locate_compiles();
  EXPECT_EQ(warnings.size(), 1u);  // once per call site
  set_compile_warning(nullptr, 0);
  set_python_location(nullptr);
  clear_compile_log();
}

std::string elsewhere() { return "eval.py:3"; }

TEST(CompileLog, TheWarningCountsEachCallSiteOnItsOwn) {
  clear_compile_log();
  warnings.clear();
  set_compile_warning([](const std::string& m) { warnings.push_back(m); }, 3);
  set_python_location(here);
  for (const char* sizes : {"[1,4]", "[2,4]", "[3,4]"}) log_compile(program(sizes));
  locate_compiles();
  set_python_location(elsewhere);
  for (const char* sizes : {"[4,4]", "[5,4]", "[6,4]"}) log_compile(program(sizes));
  locate_compiles();
  EXPECT_TRUE(warnings.empty());  // 6 programs of these ops, but 3 at each line
  log_compile(program("[7,4]"));
  log_compile(program("[7,4]", "f64"));
  locate_compiles();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("at eval.py:3: 4 programs; dimension 0 of input 0 of exp took 4 "
                             "sizes"),
            std::string::npos)
      << warnings[0];
  // Without a Python line, the ops stand for the site; a changed attribute, for the sizes. Two
  // sites crossing at once each get their warning.
  set_python_location(nullptr);
  for (const char* type : {"f16", "bf16", "f64", "i32"}) {
    log_compile({{"view_read", {{"type", type}, {"sizes", "[3]"}}}, {"tanh", {}}});
    log_compile({{"view_read", {{"type", type}, {"sizes", "[3]"}}}, {"sin", {}}});
  }
  locate_compiles();
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[1].find("compiling too often (tanh): 4 programs; the last because input "
                             "0: type i32 instead of"),
            std::string::npos)
      << warnings[1];
  EXPECT_NE(warnings[2].find("compiling too often (sin): 4 programs"), std::string::npos)
      << warnings[2];
  set_compile_warning(nullptr, 0);
  clear_compile_log();
}

TEST(CompileLog, CompilesLoggedBeforeAClearAreNotCounted) {
  set_python_location(here);
  warnings.clear();
  set_compile_warning([](const std::string& m) { warnings.push_back(m); }, 1);
  log_compile(program("[9,4]"));  // not located before the clear
  clear_compile_log();
  log_compile(program("[1,4]"));
  locate_compiles();
  EXPECT_TRUE(warnings.empty());  // one program at the line since the clear
  EXPECT_EQ(compile_log().size(), 1u);
  log_compile(program("[2,4]"));
  locate_compiles();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("2 programs; dimension 0 of input 0 of exp took 2 sizes"),
            std::string::npos)
      << warnings[0];
  set_compile_warning(nullptr, 0);
  set_python_location(nullptr);
  clear_compile_log();
}

}  // namespace
}  // namespace torchtpu::engine
