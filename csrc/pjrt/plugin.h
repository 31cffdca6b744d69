// A loaded PJRT plugin: the dlopen'ed library, its PJRT_Api table and its version.
#pragma once

#include <memory>
#include <string>

#include "pjrt/error.h"
#include "pjrt_c_api.h"

namespace torchtpu::pjrt {

// Declares a zero-initialised PJRT argument struct with its struct_size set.
#define TORCHTPU_PJRT_ARGS(type, name) \
  type name{};                         \
  name.struct_size = type##_STRUCT_SIZE

class Plugin {
 public:
  // Loads the plugin at `path` (never unloaded: plugins keep static registries), checks that its
  // API version fits the header torchtpu was built with, and initialises it once.
  static std::shared_ptr<Plugin> load(const std::string& path);

  const std::string& path() const { return path_; }
  int api_major() const { return api_->pjrt_api_version.major_version; }
  int api_minor() const { return api_->pjrt_api_version.minor_version; }
  // "0.81"
  std::string api_version() const;
  static std::string header_version();

  // Calls one PJRT entry point, turning a returned PJRT_Error into a pjrt::Error. A function the
  // plugin's table does not have (older plugin) raises kUnimplemented instead of jumping to null.
  template <typename Args>
  void call(PJRT_Error* (*PJRT_Api::*fn)(Args*), const char* name, Args* args) const {
    check(resolve(fn, name)(args), name);
  }
  template <typename Fn>
  Fn* resolve(Fn* PJRT_Api::*fn, const char* name) const {
    if (!provides(fn)) missing(name);
    return api_->*fn;
  }
  // Throws pjrt::Error for a non-null error (and destroys it).
  void check(PJRT_Error* error, const char* what) const;
  // Whether the plugin's table has a (non-null) entry point: older plugins end before newer ones.
  template <typename Fn>
  bool provides(Fn* PJRT_Api::*fn) const {
    size_t offset = reinterpret_cast<const char*>(&(api_->*fn)) -
                    reinterpret_cast<const char*>(api_);
    return offset + sizeof(Fn*) <= api_->struct_size && api_->*fn != nullptr;
  }

  const PJRT_Api* api() const { return api_; }

 private:
  Plugin(std::string path, const PJRT_Api* api) : path_(std::move(path)), api_(api) {}
  [[noreturn]] void missing(const char* name) const;

  std::string path_;
  const PJRT_Api* api_;
};

#define TORCHTPU_PJRT_CALL(plugin, fn, args) (plugin).call(&PJRT_Api::fn, #fn, args)

}  // namespace torchtpu::pjrt
