// An owned PJRT_Client and the devices it can address.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pjrt/buffer.h"
#include "pjrt/executable.h"

namespace torchtpu::pjrt {

// A plugin-specific PJRT_Client_Create option, e.g. {"cpu_device_count", int64_t{1}}.
struct ClientOption {
  std::string name;
  std::variant<int64_t, std::string, bool, float> value;
};

struct MemoryStats {
  int64_t bytes_in_use = 0;
  std::optional<int64_t> peak_bytes_in_use;
  std::optional<int64_t> bytes_limit;
};

class Device {
 public:
  Device(std::shared_ptr<const Plugin> plugin, PJRT_Device* device);
  PJRT_Device* raw() const { return device_; }
  int id() const { return id_; }
  const std::string& kind() const { return kind_; }
  // Empty when the plugin does not report memory statistics (the CPU plugin does not).
  std::optional<MemoryStats> memory_stats() const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_Device* device_;
  int id_ = 0;
  std::string kind_;
};

class Client {
 public:
  Client(std::shared_ptr<const Plugin> plugin, const std::vector<ClientOption>& options);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  const Plugin& plugin() const { return *plugin_; }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  const Device& device(int index) const { return devices_.at(index); }

  // Copies dense row-major host data to a new buffer on `device` (the host memory may be reused
  // as soon as this returns).
  std::unique_ptr<Buffer> buffer_from_host(const void* data, PJRT_Buffer_Type type,
                                           const std::vector<int64_t>& dims,
                                           const Device& device) const;
  // The same, but the copy may still read `data` after this returns: `data` must stay alive and
  // unchanged until `*done` is ready.
  std::unique_ptr<Buffer> buffer_from_host_async(const void* data, PJRT_Buffer_Type type,
                                                 const std::vector<int64_t>& dims,
                                                 const Device& device,
                                                 std::unique_ptr<Event>* done) const;
  // A buffer over host memory the caller gives up: a plugin that can (the CPU plugin, for 16-byte
  // aligned dense data) uses `data` in place, others copy it. `keep` (what owns `data`) is held
  // until the plugin is done with it: when the buffer dies, or when the copy is done; `data` must
  // not change until then.
  std::unique_ptr<Buffer> buffer_adopting_host(const void* data, PJRT_Buffer_Type type,
                                               const std::vector<int64_t>& dims,
                                               const Device& device,
                                               std::shared_ptr<const void> keep) const;
  // Compiles StableHLO (text or bytecode) with serialized xla.CompileOptionsProto bytes.
  std::unique_ptr<Executable> compile(const std::string& mlir,
                                      const std::string& compile_options) const;
  std::unique_ptr<Executable> deserialize(const std::string& serialized) const;

 private:
  // `semantics` is a PJRT_HostBufferSemantics.
  std::unique_ptr<Buffer> transfer_from_host(const void* data, PJRT_Buffer_Type type,
                                             const std::vector<int64_t>& dims, const Device& device,
                                             int semantics, std::unique_ptr<Event>* done) const;

  std::shared_ptr<const Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_;
  std::string platform_version_;
  std::vector<Device> devices_;
};

// The minimal portable xla.CompileOptionsProto: num_replicas=1, num_partitions=1,
// compile_portable_executable=true, so one executable runs on any device chosen at execute time.
const std::string& portable_compile_options();

}  // namespace torchtpu::pjrt
