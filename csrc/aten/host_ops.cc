// Small integer work whose shapes keep changing runs on the host.
//
// A decoding loop lengthens its token ids, positions and attention mask by one at every step. The
// ops on them are tiny, but each new length is a new program on the device: tens of milliseconds
// of compiling for a few microseconds of work, at every token. A Python line whose op has already
// compiled for two shapes, and that brings a third shape, runs it on PyTorch's CPU kernel instead
// when the op reads and writes only integer or boolean tensors of at most 256 KiB: their values
// are copied to the host (a wait for the work producing them, as .item() is) and the results
// back, and nothing is compiled. A shape the device ran keeps running there; a shape a line ran
// on the host keeps running there at that line (another line with a few fixed shapes, which ran
// that one too, stays on the device, asynchronous). Random ops, and everything in a torch.compile
// capture, stay on the device.
//
// A small integer result made from scalars alone (an arange, a fill of a new tensor; at most
// 4 KiB; up to 256 KiB where its line's shapes keep changing, as above), or from tensors whose
// values an op made on the host (beside device values outside any pending program), is made on
// the host always: an upload costs what a launch does, needs no program per size, and keeps the
// values on the host for the host ops that read them, which then do not wait for the device's
// work before them (a decoding step's positions, mask and stopping criteria, beside its
// forward).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "aten/ops.h"
#include "engine/compile_log.h"
#include "engine/eager.h"

namespace torchtpu::aten {
namespace {

constexpr size_t kHostBytes = 256 << 10;  // per tensor read or written, storage included
constexpr size_t kMadeOnHostBytes = 4096;  // a factory's output made on the host always
constexpr int kShapesCompiledPerSite = 2;
constexpr size_t kMaxRemembered = 1 << 14;

std::atomic<bool> enabled{true};
std::atomic<uint64_t> host_op_count{0};
thread_local int host_op_reads = 0;

// Where calls ran, by geometry; for a geometry some line ran on the host, by geometry and line
// (another line running it among a few fixed shapes stays on the device).
struct Routes {
  std::mutex mutex;
  std::unordered_map<uint64_t, bool> hosted;       // geometry: whether some line ran it on the host
  std::unordered_map<uint64_t, bool> at_line;      // geometry and line, for those: on the host
  std::unordered_map<std::string, int> shapes_at;  // op and line: geometries seen there
};

Routes& routes() {
  static Routes* r = new Routes();
  return *r;
}

bool small_integer_input(const at::Tensor& t) {
  if (!t.defined()) return true;
  if (t.is_cpu()) return t.dim() == 0;  // a CPU scalar operand, as CUDA takes
  return t.is_privateuseone() && at::isIntegralType(t.scalar_type(), /*includeBool=*/true) &&
         !t.is_conj() && !t.is_neg() && t.storage().nbytes() <= kHostBytes;
}

// The call's geometry beyond what `key` (the meta function's key) holds: where each tensor
// starts in its storage and how large that storage is, which a device program is compiled for.
uint64_t geometry(hlo::Fingerprint key, const std::vector<const at::Tensor*>& tensors) {
  for (const at::Tensor* t : tensors) {
    if (!t->defined() || t->is_cpu()) continue;
    key.add(static_cast<int64_t>(t->storage_offset()));
    key.add(static_cast<int64_t>(t->storage().nbytes()));
  }
  return key.digest();
}

}  // namespace

bool small_integer_work(const std::vector<const at::Tensor*>& tensors) {
  if (!enabled.load(std::memory_order_relaxed)) return false;
  for (const at::Tensor* t : tensors) {
    if (!small_integer_input(*t)) return false;
  }
  return !engine::capturing();
}

bool runs_on_host(const std::string& op, const std::vector<const at::Tensor*>& tensors,
                  hlo::Fingerprint key) {
  if (!small_integer_work(tensors)) return false;
  uint64_t call = geometry(std::move(key), tensors);
  Routes& r = routes();
  bool seen = false;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto found = r.hosted.find(call);
    if (found != r.hosted.end() && !found->second) return false;  // the device's, everywhere
    seen = found != r.hosted.end();
  }
  // A new geometry (about to compile a program), or one the host ran: finding the Python line
  // costs little beside either. It is found outside the lock, as it takes the interpreter's.
  std::string site = op + "@" + engine::python_location();
  uint64_t call_at_line = call ^ (std::hash<std::string>()(site) * 0x9e3779b97f4a7c15ull);
  bool host;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.hosted.size() + r.at_line.size() >= kMaxRemembered) {
      r.hosted.clear();
      r.at_line.clear();
      r.shapes_at.clear();
      seen = false;
    }
    if (!seen) {
      host = ++r.shapes_at[site] > kShapesCompiledPerSite;
      r.hosted[call] = host;
      if (host) r.at_line[call_at_line] = true;
    } else {
      auto [found, added] = r.at_line.emplace(call_at_line, false);
      if (added) found->second = ++r.shapes_at[site] > kShapesCompiledPerSite;
      host = found->second;
    }
  }
  if (host) ++host_op_count;
  return host;
}

namespace {

// Whether running the call on the host cuts no pending program: some of its tensors hold values
// an op made on the host, still current, and the others' values are on the device outside any
// pending program (a read waits for their launched computation, as .item() does).
bool values_on_host(const std::vector<const at::Tensor*>& tensors) {
  auto on_device = [](const at::Tensor* t) { return t->defined() && !t->is_cpu(); };
  bool held = false;
  for (const at::Tensor* t : tensors) held = held || (on_device(t) && held_on_host(*t));
  if (!held) return false;  // before asking the device anything
  for (const at::Tensor* t : tensors) {
    if (on_device(t) && !held_on_host(*t) && !readable_at_once(*t)) return false;
  }
  return true;
}

// PyTorch's CPU kernels split their work over OpenMP's threads, which spin for a while after each
// parallel region: beside the device's own threads on the same cores, the 64x64 tril of a causal
// mask on the host made a Strict decoding step 1.6x slower. A host op's tensors are small, so it
// runs on the calling thread alone. OpenMP's thread count is a setting of each calling thread:
// other threads, and this one after the op, keep theirs.
class OneCpuThread {
 public:
  OneCpuThread() {
    const OpenMp& omp = openmp();
    if (omp.set == nullptr) return;
    at::get_num_threads();  // PyTorch's own first setting of this thread's count comes first
    previous_ = omp.get();
    if (previous_ > 1) omp.set(1);
  }
  OneCpuThread(const OneCpuThread&) = delete;
  OneCpuThread& operator=(const OneCpuThread&) = delete;
  ~OneCpuThread() {
    if (previous_ > 1) openmp().set(previous_);
  }

 private:
  struct OpenMp {
    void (*set)(int) = nullptr;
    int (*get)() = nullptr;
  };
  // The OpenMP runtime PyTorch was built with, already loaded beside it (none: nothing to do).
  static const OpenMp& openmp() {
    static const OpenMp found = [] {
      OpenMp omp;
      for (const char* name : {"libgomp.so.1", "libiomp5.so", "libomp.so"}) {
        void* lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
        if (lib == nullptr) continue;
        omp.set = reinterpret_cast<void (*)(int)>(dlsym(lib, "omp_set_num_threads"));
        omp.get = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_max_threads"));
        if (omp.set != nullptr && omp.get != nullptr) break;
        omp = {};
      }
      return omp;
    }();
    return found;
  }
  int previous_ = 0;
};

void run_on_cpu(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                torch::jit::Stack* stack) {
  for (const c10::IValue& a : args) stack->push_back(a);
  HostOpReads reads;  // the inputs' values, and the results kept on the host
  OneCpuThread one_thread;
  at::native::cpu_fallback(op, stack);
}

}  // namespace

bool run_on_host_when_shapes_vary(const c10::OperatorHandle& op,
                                  const std::vector<c10::IValue>& args,
                                  const std::vector<const at::Tensor*>& tensors,
                                  const hlo::Fingerprint& key, torch::jit::Stack* stack) {
  if (op.hasTag(at::Tag::nondeterministic_seeded) || !small_integer_work(tensors)) return false;
  if (values_on_host(tensors)) {
    ++host_op_count;
  } else if (!runs_on_host(op.schema().name(), tensors, key)) {
    return false;
  }
  run_on_cpu(op, args, stack);
  return true;
}

bool make_on_host(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                  const std::vector<const at::Tensor*>& tensors, const hlo::Fingerprint& key,
                  const std::vector<std::pair<at::ScalarType, size_t>>& outputs,
                  torch::jit::Stack* stack) {
  if (op.hasTag(at::Tag::nondeterministic_seeded)) return false;
  size_t most = 0;
  for (const auto& [dtype, bytes] : outputs) most = bytes > most ? bytes : most;
  if (most > kHostBytes ||
      !(made_on_host(outputs) || runs_on_host(op.schema().name(), tensors, key))) {
    return false;
  }
  run_on_cpu(op, args, stack);
  return true;
}

bool made_on_host(const std::vector<std::pair<at::ScalarType, size_t>>& outputs) {
  if (!enabled.load(std::memory_order_relaxed) || engine::capturing()) return false;
  for (const auto& [dtype, bytes] : outputs) {
    if (!at::isIntegralType(dtype, /*includeBool=*/true) || bytes > kMadeOnHostBytes) {
      return false;
    }
  }
  ++host_op_count;
  return true;
}

uint64_t host_ops() { return host_op_count.load(); }

void set_host_ops(bool on) { enabled = on; }

HostOpReads::HostOpReads() { ++host_op_reads; }
HostOpReads::~HostOpReads() { --host_op_reads; }
bool reading_for_host_op() { return host_op_reads > 0; }

}  // namespace torchtpu::aten
