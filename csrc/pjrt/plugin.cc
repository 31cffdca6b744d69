#include "pjrt/plugin.h"

#include <dlfcn.h>

#include <mutex>
#include <unordered_map>

namespace torchtpu::pjrt {
namespace {

std::string version_string(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace

std::string Plugin::api_version() const { return version_string(api_major(), api_minor()); }

std::string Plugin::header_version() { return version_string(PJRT_API_MAJOR, PJRT_API_MINOR); }

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  // A process loads each plugin once; PJRT_Plugin_Initialize must not run twice.
  static std::mutex mutex;
  static std::unordered_map<std::string, std::shared_ptr<Plugin>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = loaded.find(path); it != loaded.end()) return it->second;

  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error(ErrorCode::kNotFound, "torchtpu: cannot load the PJRT plugin '" + path +
                                          "': " + (why ? why : "unknown dlopen error") +
                                          ". Set TORCHTPU_PJRT_PLUGIN to a PJRT plugin .so, or "
                                          "install the CPU plugin: pip install xla-cpu-pjrt==0.0.1");
  }
  using GetPjrtApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetPjrtApiFn>(dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                "torchtpu: '" + path + "' is not a PJRT plugin (it exports no GetPjrtApi)");
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr || api->struct_size < offsetof(PJRT_Api, pjrt_api_version) +
                                               sizeof(PJRT_Api_Version)) {
    throw Error(ErrorCode::kInvalidArgument,
                "torchtpu: the PJRT plugin '" + path + "' returned an invalid API table");
  }
  std::shared_ptr<Plugin> plugin(new Plugin(path, api));
  if (plugin->api_major() != PJRT_API_MAJOR) {
    throw Error(ErrorCode::kFailedPrecondition,
                "torchtpu: the PJRT plugin '" + path + "' implements PJRT C API " +
                    plugin->api_version() + ", whose major version differs from the " +
                    header_version() + " torchtpu was built with; install a plugin with PJRT C "
                    "API " + std::to_string(PJRT_API_MAJOR) + ".x");
  }
  TORCHTPU_PJRT_ARGS(PJRT_Plugin_Initialize_Args, init);
  TORCHTPU_PJRT_CALL(*plugin, PJRT_Plugin_Initialize, &init);
  loaded.emplace(path, plugin);
  return plugin;
}

void Plugin::missing(const char* name) const {
  throw Error(ErrorCode::kUnimplemented, std::string("torchtpu: the PJRT plugin '") + path_ +
                                             "' (PJRT C API " + api_version() +
                                             ") does not implement " + name);
}

void Plugin::check(PJRT_Error* error, const char* what) const {
  if (error == nullptr) return;
  TORCHTPU_PJRT_ARGS(PJRT_Error_Message_Args, message_args);
  message_args.error = error;
  api_->PJRT_Error_Message(&message_args);
  std::string message(message_args.message, message_args.message_size);
  TORCHTPU_PJRT_ARGS(PJRT_Error_GetCode_Args, code_args);
  code_args.error = error;
  PJRT_Error* code_error = api_->PJRT_Error_GetCode(&code_args);
  auto code = code_error ? ErrorCode::kUnknown : static_cast<ErrorCode>(code_args.code);
  TORCHTPU_PJRT_ARGS(PJRT_Error_Destroy_Args, destroy);
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
  if (code_error != nullptr) {
    destroy.error = code_error;
    api_->PJRT_Error_Destroy(&destroy);
  }
  // A plugin newer than our header rejects argument structs that have grown since: say so plainly.
  bool struct_too_small = message.find("Unexpected") != std::string::npos &&
                          message.find("size") != std::string::npos;
  if (struct_too_small && api_minor() > PJRT_API_MINOR) {
    message = "torchtpu was built against PJRT C API " + header_version() +
              ", older than the plugin's " + api_version() + ", and the plugin refused " + what +
              " (" + message + "). Rebuild torchtpu against a pjrt_c_api.h of version " +
              api_version() + " or newer, or use a plugin of API " + header_version();
  } else {
    message = std::string(what) + " failed: " + message;
  }
  throw Error(code, message);
}

}  // namespace torchtpu::pjrt
