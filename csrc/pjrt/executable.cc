#include "pjrt/executable.h"

#include "pjrt/client.h"

namespace torchtpu::pjrt {

Executable::Executable(std::shared_ptr<const Plugin> plugin, PJRT_LoadedExecutable* executable)
    : plugin_(std::move(plugin)), loaded_(executable) {
  TORCHTPU_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, get);
  get.loaded_executable = loaded_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_LoadedExecutable_GetExecutable, &get);
  executable_ = get.executable;
  TORCHTPU_PJRT_ARGS(PJRT_Executable_NumOutputs_Args, outputs);
  outputs.executable = executable_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Executable_NumOutputs, &outputs);
  num_outputs_ = outputs.num_outputs;
}

Executable::~Executable() {
  TORCHTPU_PJRT_ARGS(PJRT_Executable_Destroy_Args, exe);
  exe.executable = executable_;
  plugin_->check(plugin_->api()->PJRT_Executable_Destroy(&exe), "PJRT_Executable_Destroy");
  TORCHTPU_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args, loaded);
  loaded.executable = loaded_;
  plugin_->check(plugin_->api()->PJRT_LoadedExecutable_Destroy(&loaded),
                 "PJRT_LoadedExecutable_Destroy");
}

std::vector<std::unique_ptr<Buffer>> Executable::execute(
    const std::vector<PJRT_Buffer*>& arguments, const Device& device,
    std::unique_ptr<Event>* done, const std::vector<int64_t>& keep) const {
  TORCHTPU_PJRT_ARGS(PJRT_ExecuteOptions, options);
  options.non_donatable_input_indices = keep.data();
  options.num_non_donatable_input_indices = keep.size();
  std::vector<PJRT_Buffer*> outputs(num_outputs_, nullptr);
  PJRT_Buffer* const* argument_list = arguments.data();
  PJRT_Buffer** output_list = outputs.data();
  TORCHTPU_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args, args);
  args.executable = loaded_;
  args.options = &options;
  args.argument_lists = &argument_list;
  args.num_devices = 1;
  args.num_args = arguments.size();
  args.output_lists = &output_list;
  args.execute_device = device.raw();
  PJRT_Event* complete = nullptr;
  if (done != nullptr) args.device_complete_events = &complete;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_LoadedExecutable_Execute, &args);
  if (complete != nullptr) *done = std::make_unique<Event>(plugin_, complete);
  std::vector<std::unique_ptr<Buffer>> result;
  result.reserve(outputs.size());
  for (PJRT_Buffer* buffer : outputs) result.push_back(std::make_unique<Buffer>(plugin_, buffer));
  return result;
}

std::string Executable::serialize() const {
  TORCHTPU_PJRT_ARGS(PJRT_Executable_Serialize_Args, args);
  args.executable = executable_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Executable_Serialize, &args);
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) {
    args.serialized_executable_deleter(args.serialized_executable);
  }
  return bytes;
}

int64_t Executable::generated_code_bytes() const {
  TORCHTPU_PJRT_ARGS(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, args);
  args.executable = executable_;
  try {
    TORCHTPU_PJRT_CALL(*plugin_, PJRT_Executable_SizeOfGeneratedCodeInBytes, &args);
  } catch (const Error&) {
    return -1;
  }
  return args.size_in_bytes;
}

}  // namespace torchtpu::pjrt
