#include "engine/runtime.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <variant>

#include "engine/device_asserts.h"
#include "engine/exit_gate.h"
#include "engine/trace.h"

namespace torchtpu::engine {
namespace {

std::mutex& config_mutex() {
  static std::mutex m;
  return m;
}

RuntimeConfig& config() {
  static RuntimeConfig c;
  return c;
}

struct StartResult {
  Runtime* runtime = nullptr;
  std::string error;
  bool tried = false;
};

StartResult& start_result() {
  static StartResult r;
  return r;
}

// Set in the child of a fork() made after the runtime started: the parent's PJRT client (its
// threads, its locks) did not come along, so nothing in the child may call into it.
std::atomic<bool> forked_child{false};

void mark_forked_child() { forked_child = true; }

// On the CPU plugin a device buffer, and each program's scratch memory, is host memory from
// malloc. glibc serves blocks over 32 MiB with a fresh mmap and unmaps them when freed, so a
// program whose scratch memory is that large (a DeferAndFuse training step's: 52 MiB for
// train-GPT) touched 13,000 new pages on every run; the page faults and the kernel's zeroing of
// those pages took 18 % of the step. A device allocator keeps freed memory for the next request:
// so does this, by serving every block from malloc's heap and returning to the system only what
// exceeds 1 GiB free at the heap's top.
void keep_freed_host_memory() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

constexpr size_t kMaxCachedScalars = 4096;
constexpr size_t kMaxInFlight = 4096;

// The host CPU's model and instruction set extensions: the first processor's lines of
// /proc/cpuinfo that name them (x86's "model name" and "flags", Arm's "CPU implementer", "CPU
// part" and "Features"), or "" where there is no such file.
std::string host_cpu() {
  static const char* const kKeys[] = {"model name", "flags", "CPU implementer", "CPU architecture",
                                      "CPU variant", "CPU part", "Features"};
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, out;
  while (std::getline(cpuinfo, line) && !line.empty()) {  // a blank line ends the first processor
    for (const char* key : kKeys) {
      if (line.rfind(key, 0) == 0) out += line + "\n";
    }
  }
  return out;
}

// What an executable depends on beside its text and compile options: the plugin (its platform,
// version and C API version, which a rebuilt plugin may keep, and its file's path, size and
// modification time), the client's create options, the devices' kind, the flags XLA reads from
// the environment (XLA_FLAGS and libtpu's LIBTPU_INIT_ARGS: fast-math flags change results), and
// on the CPU plugin the host's CPU, whose instruction set the code is compiled for.
std::string executable_identity(const pjrt::Client& client, const RuntimeConfig& c) {
  std::ostringstream out;
  out << client.platform_name() << "\n" << client.platform_version() << "\n"
      << client.plugin().api_version() << "\n" << c.version << "\n" << c.plugin_path;
  struct stat st {};
  if (::stat(c.plugin_path.c_str(), &st) == 0) {
    out << " " << st.st_size << " " << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec;
  }
  for (const pjrt::ClientOption& option : c.options) {
    out << "\n" << option.name << "=";
    std::visit([&](const auto& value) { out << value; }, option.value);
  }
  for (int i = 0; i < client.device_count(); ++i) out << "\n" << client.device(i).kind();
  for (const char* name : {"XLA_FLAGS", "LIBTPU_INIT_ARGS"}) {
    const char* value = std::getenv(name);
    out << "\n" << name << "=" << (value != nullptr ? value : "");
  }
  if (client.platform_name() == "cpu") out << "\n" << host_cpu();
  return out.str();
}

}  // namespace

void configure_runtime(RuntimeConfig c) {
  std::lock_guard<std::mutex> lock(config_mutex());
  config() = std::move(c);
}

Runtime::Runtime(const RuntimeConfig& c) : platform_(c.platform) {
  client_ = std::make_unique<pjrt::Client>(pjrt::Plugin::load(c.plugin_path), c.options);
  if (c.keep_host_memory && client_->platform_name() == "cpu") keep_freed_host_memory();
  in_flight_.resize(client_->device_count());
  marks_ = std::make_unique<LaunchMarks>(client_->device_count());
  executables_.set_max_bytes(c.memory_cache_max_bytes);
  if (!c.cache_dir.empty()) {
    std::string salt = executable_identity(*client_, c) + "\n" + pjrt::portable_compile_options();
    executables_.set_disk_cache(
        std::make_shared<DiskCache>(c.cache_dir, c.cache_max_bytes, std::move(salt)));
  }
}

void refuse_in_forked_child() {
  if (forked_child.load()) {
    // CUDA's words, so code that handles that case recognizes this one.
    throw std::runtime_error(
        "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you "
        "must use the 'spawn' start method");
  }
}

bool in_forked_child() { return forked_child.load(); }

Runtime& Runtime::get() {
  refuse_in_forked_child();  // before the lock: the fork may have copied it held
  std::optional<EngineWork> starting;  // loading the plugin takes seconds
  if (!started()) starting.emplace();
  std::lock_guard<std::mutex> lock(config_mutex());
  StartResult& r = start_result();
  if (!r.tried) {
    r.tried = true;
    try {
      if (config().plugin_path.empty()) {
        throw std::runtime_error(config().unavailable.empty()
                                     ? "torchtpu: no PJRT plugin is configured"
                                     : config().unavailable);
      }
      r.runtime = new Runtime(config());  // lives for the process: buffers outlive statics
      pthread_atfork(nullptr, nullptr, &mark_forked_child);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
  }
  if (r.runtime == nullptr) throw std::runtime_error(r.error);
  return *r.runtime;
}

int Runtime::device_count_or_zero() noexcept {
  // A forked child still knows the parent's devices (as torch.cuda.device_count does there).
  if (forked_child.load()) return start_result().runtime->device_count();
  try {
    return get().device_count();
  } catch (...) {
    return 0;
  }
}

bool Runtime::started() {
  if (forked_child.load()) return false;
  std::lock_guard<std::mutex> lock(config_mutex());
  return start_result().runtime != nullptr;
}

const pjrt::Device& Runtime::device(int index) const {
  if (index < 0 || index >= client_->device_count()) {
    throw std::out_of_range("torchtpu: device index " + std::to_string(index) +
                            " is out of range: there are " +
                            std::to_string(client_->device_count()) + " tpu devices");
  }
  return client_->device(index);
}

std::string Runtime::device_name() const {
  std::string platform = client_->platform_name();
  std::string upper;
  for (char c : platform) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "CUDA") {
    upper = "GPU " + client_->device(0).kind();
  }
  return "XLA " + upper + " (PJRT " + client_->plugin().api_version() + ")";
}

std::shared_ptr<pjrt::Buffer> Runtime::upload(const void* data, hlo::ElementType type,
                                              const std::vector<int64_t>& dims, int device) const {
  trace::Range copy(trace::Kind::kCopyToDevice, device, trace::bytes(hlo::byte_width(type), dims));
  return client_->buffer_from_host(data, static_cast<PJRT_Buffer_Type>(type), dims,
                                   this->device(device));
}

std::shared_ptr<pjrt::Buffer> Runtime::scalar(hlo::ElementType type, const void* bits,
                                              int device) {
  ScalarKey key{type, device, {0, 0}};
  std::memcpy(key.bits, bits, std::min(hlo::byte_width(type), sizeof(key.bits)));
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = scalars_.find(key);
  if (it != scalars_.end()) return it->second;
  if (scalars_.size() >= kMaxCachedScalars) scalars_.clear();
  auto buffer = upload(bits, type, {}, device);
  scalars_.emplace(key, buffer);
  return buffer;
}

std::vector<std::shared_ptr<pjrt::Buffer>> Runtime::execute(
    const pjrt::Executable& executable, const std::vector<PJRT_Buffer*>& arguments, int device,
    const std::vector<int64_t>& keep, std::shared_ptr<const void> hold) {
  std::unique_ptr<pjrt::Event> done;
  int64_t launch = trace::launch_time();
  std::vector<std::unique_ptr<pjrt::Buffer>> made =
      executable.execute(arguments, this->device(device), &done, keep);
  trace::launched(launch, device, done.get());
  std::vector<std::shared_ptr<pjrt::Buffer>> outputs(std::make_move_iterator(made.begin()),
                                                     std::make_move_iterator(made.end()));
  if (!done) {
    // A plugin that gives no completion event: nothing to wait for later, so wait now.
    for (const auto& b : outputs) b->await_ready();
    return outputs;
  }
  track(std::move(done), device, std::move(hold));
  return outputs;
}

std::shared_ptr<pjrt::Buffer> Runtime::upload_async(const void* data, hlo::ElementType type,
                                                    const std::vector<int64_t>& dims, int device,
                                                    std::shared_ptr<const void> keep) {
  std::unique_ptr<pjrt::Event> done;
  std::shared_ptr<pjrt::Buffer> buffer = client_->buffer_from_host_async(
      data, static_cast<PJRT_Buffer_Type>(type), dims, this->device(device), &done);
  if (done) track(std::move(done), device, std::move(keep));
  return buffer;
}

std::shared_ptr<pjrt::Buffer> Runtime::adopt_host(const void* data, hlo::ElementType type,
                                                  const std::vector<int64_t>& dims, int device,
                                                  std::shared_ptr<const void> keep) const {
  // Not tracked as a launch: on the CPU plugin the plugin is done with `data` only when the
  // buffer dies, which synchronize() must not wait for.
  return client_->buffer_adopting_host(data, static_cast<PJRT_Buffer_Type>(type), dims,
                                       this->device(device), std::move(keep));
}

void Runtime::download_async(std::shared_ptr<pjrt::Buffer> buffer, void* dst, size_t size,
                             int device, std::shared_ptr<const void> keep) {
  std::unique_ptr<pjrt::Event> done = buffer->to_host_async(dst, size);
  // The source buffer, too, stays alive until the copy is done.
  auto both =
      std::make_shared<std::pair<std::shared_ptr<pjrt::Buffer>, std::shared_ptr<const void>>>(
          std::move(buffer), std::move(keep));
  track(std::move(done), device, std::move(both));
}

void Runtime::track(std::unique_ptr<pjrt::Event> done, int device,
                    std::shared_ptr<const void> keep) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::deque<Launch>& launches = in_flight_.at(device);
  // Bounded: past the bound, forget the finished launches, then wait for the oldest.
  if (launches.size() >= kMaxInFlight) {
    std::deque<Launch> running;
    for (auto& l : launches) {
      if (!l.done->is_ready()) running.push_back(std::move(l));
    }
    launches.swap(running);
    while (launches.size() >= kMaxInFlight / 2) {
      launches.front().done->await();
      launches.pop_front();
    }
  }
  uint64_t serial = marks_->start(device);
  LaunchMarks* marks = marks_.get();
  try {
    done->on_ready(
        [marks, device, serial](const std::string&) { marks->finished(device, serial); });
  } catch (const pjrt::Error&) {
    // A plugin without callbacks: marks see the launch done once synchronize() waits for it.
  }
  launches.push_back(Launch{std::move(done), std::move(keep)});
}

size_t Runtime::launches_in_flight(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.at(device).size();
}

void Runtime::synchronize(int device) {
  std::deque<Launch> launches;
  uint64_t through = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    launches.swap(in_flight_.at(device));
    through = marks_->last_started(device);
  }
  for (auto& l : launches) l.done->await();
  marks_->finished_through(device, through);
  raise_failed_asserts(device);
}

}  // namespace torchtpu::engine
