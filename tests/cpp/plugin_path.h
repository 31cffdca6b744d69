// Where the tests find the CPU plugin and the fake plugins CMake built for them.
#pragma once

#include <cstdlib>
#include <string>

namespace torchtpu::testing {

inline std::string cpu_plugin_path() {
  const char* path = std::getenv("TORCHTPU_TEST_CPU_PLUGIN");
  return path ? path : TORCHTPU_CPU_PLUGIN;
}

}  // namespace torchtpu::testing
