#include "pjrt/client.h"

namespace torchtpu::pjrt {

const std::string& portable_compile_options() {
  static const std::string bytes("\x20\x01\x1a\x04\x20\x01\x28\x01", 8);
  return bytes;
}

Device::Device(std::shared_ptr<const Plugin> plugin, PJRT_Device* device)
    : plugin_(std::move(plugin)), device_(device) {
  TORCHTPU_PJRT_ARGS(PJRT_Device_GetDescription_Args, get);
  get.device = device_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Device_GetDescription, &get);
  TORCHTPU_PJRT_ARGS(PJRT_DeviceDescription_Id_Args, id);
  id.device_description = get.device_description;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_DeviceDescription_Id, &id);
  id_ = id.id;
  TORCHTPU_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args, kind);
  kind.device_description = get.device_description;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_DeviceDescription_Kind, &kind);
  kind_.assign(kind.device_kind, kind.device_kind_size);
}

std::optional<MemoryStats> Device::memory_stats() const {
  if (!plugin_->provides(&PJRT_Api::PJRT_Device_MemoryStats)) {
    return std::nullopt;
  }
  TORCHTPU_PJRT_ARGS(PJRT_Device_MemoryStats_Args, args);
  args.device = device_;
  try {
    TORCHTPU_PJRT_CALL(*plugin_, PJRT_Device_MemoryStats, &args);
  } catch (const Error&) {
    return std::nullopt;  // UNIMPLEMENTED on plugins without an allocator of their own
  }
  MemoryStats stats;
  stats.bytes_in_use = args.bytes_in_use;
  if (args.peak_bytes_in_use_is_set) stats.peak_bytes_in_use = args.peak_bytes_in_use;
  if (args.bytes_limit_is_set) stats.bytes_limit = args.bytes_limit;
  return stats;
}

Client::Client(std::shared_ptr<const Plugin> plugin, const std::vector<ClientOption>& options)
    : plugin_(std::move(plugin)) {
  std::vector<PJRT_NamedValue> values(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    PJRT_NamedValue& v = values[i];
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = options[i].name.c_str();
    v.name_size = options[i].name.size();
    v.value_size = 1;
    const auto& value = options[i].value;
    if (auto* i64 = std::get_if<int64_t>(&value)) {
      v.type = PJRT_NamedValue_kInt64;
      v.int64_value = *i64;
    } else if (auto* s = std::get_if<std::string>(&value)) {
      v.type = PJRT_NamedValue_kString;
      v.string_value = s->c_str();
      v.value_size = s->size();
    } else if (auto* b = std::get_if<bool>(&value)) {
      v.type = PJRT_NamedValue_kBool;
      v.bool_value = *b;
    } else {
      v.type = PJRT_NamedValue_kFloat;
      v.float_value = std::get<float>(value);
    }
  }
  TORCHTPU_PJRT_ARGS(PJRT_Client_Create_Args, create);
  create.create_options = values.data();
  create.num_options = values.size();
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Client_Create, &create);
  client_ = create.client;

  TORCHTPU_PJRT_ARGS(PJRT_Client_PlatformName_Args, name);
  name.client = client_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Client_PlatformName, &name);
  platform_name_.assign(name.platform_name, name.platform_name_size);
  TORCHTPU_PJRT_ARGS(PJRT_Client_PlatformVersion_Args, version);
  version.client = client_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Client_PlatformVersion, &version);
  platform_version_.assign(version.platform_version, version.platform_version_size);

  TORCHTPU_PJRT_ARGS(PJRT_Client_AddressableDevices_Args, devices);
  devices.client = client_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Client_AddressableDevices, &devices);
  for (size_t i = 0; i < devices.num_addressable_devices; ++i) {
    devices_.emplace_back(plugin_, devices.addressable_devices[i]);
  }
}

Client::~Client() {
  devices_.clear();
  TORCHTPU_PJRT_ARGS(PJRT_Client_Destroy_Args, args);
  args.client = client_;
  plugin_->api()->PJRT_Client_Destroy(&args);
}

std::unique_ptr<Buffer> Client::buffer_from_host(const void* data, PJRT_Buffer_Type type,
                                                 const std::vector<int64_t>& dims,
                                                 const Device& device) const {
  // kImmutableOnlyDuringCall: the host data is already copied; only the event is ours to free.
  return transfer_from_host(data, type, dims, device,
                            PJRT_HostBufferSemantics_kImmutableOnlyDuringCall, nullptr);
}

std::unique_ptr<Buffer> Client::buffer_from_host_async(const void* data, PJRT_Buffer_Type type,
                                                       const std::vector<int64_t>& dims,
                                                       const Device& device,
                                                       std::unique_ptr<Event>* done) const {
  return transfer_from_host(data, type, dims, device,
                            PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes, done);
}

std::unique_ptr<Buffer> Client::buffer_adopting_host(const void* data, PJRT_Buffer_Type type,
                                                     const std::vector<int64_t>& dims,
                                                     const Device& device,
                                                     std::shared_ptr<const void> keep) const {
  std::unique_ptr<Event> done;
  auto buffer = transfer_from_host(data, type, dims, device,
                                   PJRT_HostBufferSemantics_kImmutableZeroCopy, &done);
  if (done) buffer->borrow_host_memory(std::move(done), std::move(keep));
  return buffer;
}

std::unique_ptr<Buffer> Client::transfer_from_host(const void* data, PJRT_Buffer_Type type,
                                                   const std::vector<int64_t>& dims,
                                                   const Device& device, int semantics,
                                                   std::unique_ptr<Event>* done) const {
  TORCHTPU_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args, args);
  args.client = client_;
  args.data = data;
  args.type = type;
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.host_buffer_semantics = static_cast<PJRT_HostBufferSemantics>(semantics);
  args.device = device.raw();
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Client_BufferFromHostBuffer, &args);
  auto buffer = std::make_unique<Buffer>(plugin_, args.buffer);
  if (args.done_with_host_buffer != nullptr) {
    auto event = std::make_unique<Event>(plugin_, args.done_with_host_buffer);
    if (done != nullptr) *done = std::move(event);
  }
  return buffer;
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir,
                                            const std::string& compile_options) const {
  static const char kFormat[] = "mlir";
  TORCHTPU_PJRT_ARGS(PJRT_Program, program);
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;
  TORCHTPU_PJRT_ARGS(PJRT_Client_Compile_Args, args);
  args.client = client_;
  args.program = &program;
  args.compile_options = compile_options.data();
  args.compile_options_size = compile_options.size();
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Client_Compile, &args);
  return std::make_unique<Executable>(plugin_, args.executable);
}

std::unique_ptr<Executable> Client::deserialize(const std::string& serialized) const {
  TORCHTPU_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args, args);
  args.client = client_;
  args.serialized_executable = serialized.data();
  args.serialized_executable_size = serialized.size();
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Executable_DeserializeAndLoad, &args);
  return std::make_unique<Executable>(plugin_, args.loaded_executable);
}

}  // namespace torchtpu::pjrt
