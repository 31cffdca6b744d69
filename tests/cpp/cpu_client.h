// One CPU-plugin client with two devices, shared by the C++ tests.
#pragma once

#include <memory>

#include "pjrt/client.h"
#include "plugin_path.h"

namespace torchtpu::testing {

inline std::shared_ptr<pjrt::Client> cpu_client() {
  static auto client = std::make_shared<pjrt::Client>(
      pjrt::Plugin::load(cpu_plugin_path()),
      std::vector<pjrt::ClientOption>{{"cpu_device_count", int64_t{2}}});
  return client;
}

}  // namespace torchtpu::testing
