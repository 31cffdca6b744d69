// The process's PJRT runtime: the plugin and client (created on first use), the executable
// cache, the cached scalar buffers and the work in flight on each device.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/executable_cache.h"
#include "engine/launch_marks.h"
#include "hlo/types.h"
#include "pjrt/client.h"

namespace torchtpu::engine {

struct RuntimeConfig {
  std::string plugin_path;  // empty: no plugin found, `unavailable` says why
  std::string platform;     // "cpu", "cuda", "tpu" or "" when unknown
  std::vector<pjrt::ClientOption> options;
  std::string unavailable;
  std::string cache_dir;  // empty: no disk cache
  uint64_t cache_max_bytes = uint64_t{4} << 30;
  std::string version;    // torchtpu's, part of every cache key
  uint64_t memory_cache_max_bytes = ExecutableCache::kDefaultMaxBytes;
  // On the CPU plugin, device memory is the host's malloc: keep freed blocks for reuse (see
  // keep_freed_host_memory in runtime.cc).
  bool keep_host_memory = true;
};

// Must be called before the first use (the Python package does it on import).
void configure_runtime(RuntimeConfig config);

// In the child of a fork made after the runtime started (CUDA's "bad fork"), every use of the
// device throws a RuntimeError saying to use the 'spawn' start method; a fork before the start
// leaves the child free to start its own runtime.
bool in_forked_child();
void refuse_in_forked_child();

class Runtime {
 public:
  // Starts the runtime on first call; throws a clear error (every time) if it cannot start.
  static Runtime& get();
  // The number of devices, or 0 when no plugin can be started. Never throws.
  static int device_count_or_zero() noexcept;
  static bool started();  // false in a forked child

  const pjrt::Client& client() const { return *client_; }
  int device_count() const { return client_->device_count(); }
  const pjrt::Device& device(int index) const;
  const std::string& platform() const { return platform_; }
  // "XLA CPU (PJRT 0.81)"
  std::string device_name() const;

  std::shared_ptr<pjrt::Buffer> upload(const void* data, hlo::ElementType type,
                                       const std::vector<int64_t>& dims, int device) const;
  // Starts copying host data to a new buffer without waiting: `data` must stay alive and
  // unchanged until the copy has read it, which synchronize() and marks wait for; `keep` (the
  // memory holding `data`) is held until then.
  std::shared_ptr<pjrt::Buffer> upload_async(const void* data, hlo::ElementType type,
                                             const std::vector<int64_t>& dims, int device,
                                             std::shared_ptr<const void> keep);
  // A buffer over host memory owned by `keep`, used in place where the plugin can (the CPU
  // plugin), else copied; `keep` is held while the plugin needs it. `data` may never change again.
  std::shared_ptr<pjrt::Buffer> adopt_host(const void* data, hlo::ElementType type,
                                           const std::vector<int64_t>& dims, int device,
                                           std::shared_ptr<const void> keep) const;
  // Starts copying `buffer` to `dst` on the host without waiting; `dst` is written once
  // synchronize() or a later mark is done. `keep` (the memory holding `dst`) is held until then.
  void download_async(std::shared_ptr<pjrt::Buffer> buffer, void* dst, size_t size, int device,
                      std::shared_ptr<const void> keep);
  // A 0-d buffer holding `bits` (one element of `type`), cached so repeated scalars cost nothing.
  std::shared_ptr<pjrt::Buffer> scalar(hlo::ElementType type, const void* bits, int device);

  ExecutableCache& executables() { return executables_; }

  // Launches `executable` on the device and returns its outputs at once, remembering the launch
  // so that synchronize() waits for it.
  // `keep`: arguments the program may take over that it must copy instead. `hold`: what must
  // outlive the launch, released once it is done: the buffers it takes over, whose destruction
  // waits for the program to finish on some plugins (the CPU's), which would make the launch
  // synchronous if their last holder dropped them now.
  std::vector<std::shared_ptr<pjrt::Buffer>> execute(const pjrt::Executable& executable,
                                                     const std::vector<PJRT_Buffer*>& arguments,
                                                     int device,
                                                     const std::vector<int64_t>& keep = {},
                                                     std::shared_ptr<const void> hold = nullptr);
  // Waits for every launch on the device, including those whose outputs nothing holds any more,
  // as torch.cuda.synchronize does; then raises a device-side check that failed (device_asserts.h).
  void synchronize(int device);
  // Launches synchronize() would wait for now.
  size_t launches_in_flight(int device);
  // A mark covering every launch on the device so far (what a torch.tpu.Event records).
  std::shared_ptr<LaunchMark> mark(int device) { return marks_->mark(device); }

 private:
  explicit Runtime(const RuntimeConfig& config);

  std::string platform_;
  std::unique_ptr<pjrt::Client> client_;
  ExecutableCache executables_;
  std::mutex mutex_;
  // A cached scalar's key: its element type, device and bits (zero past its width).
  struct ScalarKey {
    hlo::ElementType type;
    int device;
    uint64_t bits[2];
    bool operator==(const ScalarKey& o) const {
      return type == o.type && device == o.device && bits[0] == o.bits[0] && bits[1] == o.bits[1];
    }
  };
  struct ScalarKeyHash {
    size_t operator()(const ScalarKey& k) const {
      return std::hash<uint64_t>()(k.bits[0] * 31 + k.bits[1]) ^
             (static_cast<size_t>(k.type) << 8 | static_cast<size_t>(k.device) << 16);
    }
  };
  std::unordered_map<ScalarKey, std::shared_ptr<pjrt::Buffer>, ScalarKeyHash> scalars_;
  struct Launch {
    std::unique_ptr<pjrt::Event> done;
    std::shared_ptr<const void> keep;  // what must outlive the launch (host memory it uses)
  };
  // Remembers a launch on the device until synchronize() waits for it.
  void track(std::unique_ptr<pjrt::Event> done, int device, std::shared_ptr<const void> keep);

  // Per device, the launches not known to be done.
  std::vector<std::deque<Launch>> in_flight_;
  std::unique_ptr<LaunchMarks> marks_;
};

}  // namespace torchtpu::engine
