// An owned PJRT_LoadedExecutable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pjrt/buffer.h"

namespace torchtpu::pjrt {

class Device;

class Executable {
 public:
  Executable(std::shared_ptr<const Plugin> plugin, PJRT_LoadedExecutable* executable);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  ~Executable();

  size_t num_outputs() const { return num_outputs_; }
  // Launches the program on `device` and returns at once; each output carries its ready event,
  // and `done`, when given, gets the event of the whole execution (outputs nobody reads included).
  // Arguments the program may take over (tf.aliasing_output) are donated, except those listed
  // in `keep`, which the plugin copies first.
  std::vector<std::unique_ptr<Buffer>> execute(const std::vector<PJRT_Buffer*>& arguments,
                                               const Device& device,
                                               std::unique_ptr<Event>* done = nullptr,
                                               const std::vector<int64_t>& keep = {}) const;
  // The plugin's serialized form of the compiled program (for the persistent cache).
  std::string serialize() const;
  // The size of the compiled code as the plugin reports it, or -1 when it cannot say.
  int64_t generated_code_bytes() const;

 private:
  std::shared_ptr<const Plugin> plugin_;
  PJRT_LoadedExecutable* loaded_;
  PJRT_Executable* executable_ = nullptr;
  size_t num_outputs_ = 0;
};

}  // namespace torchtpu::pjrt
