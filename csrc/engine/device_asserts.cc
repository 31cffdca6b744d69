#include "engine/device_asserts.h"

#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "engine/eager.h"
#include "engine/runtime.h"

namespace torchtpu::engine {
namespace {

// The flag: s64[2], the failed check's id and the value that failed it; zeros while none failed.
constexpr int64_t kFlagElements = 2;

struct Flag {
  std::unique_ptr<StorageHandle> storage;
  std::shared_ptr<pjrt::Buffer> read;  // the buffer last read, so an unchanged flag is not read again
};

std::mutex mutex;
std::unordered_map<int, Flag>& flags() {
  static auto* f = new std::unordered_map<int, Flag>();
  return *f;
}
std::unordered_map<std::string, int64_t>& ids() {
  static auto* m = new std::unordered_map<std::string, int64_t>();
  return *m;
}
std::vector<AssertCheck>& checks() {
  static auto* c = new std::vector<AssertCheck>();
  return *c;
}

void default_raiser(bool index_error, const std::string& message) {
  if (index_error) throw std::out_of_range(message);
  throw std::runtime_error(message);
}
AssertRaiser raiser = default_raiser;

StorageHandle* flag_storage(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  Flag& f = flags()[device];
  if (!f.storage) {
    f.storage = std::make_unique<StorageHandle>(device, kFlagElements * sizeof(int64_t));
    f.storage->set_persistent();
  }
  return f.storage.get();
}

}  // namespace

int64_t assert_id(const AssertCheck& check) {
  std::string key = std::string(check.index_error ? "I" : "R") + check.message;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ids().find(key);
  if (it != ids().end()) return it->second;
  checks().push_back(check);
  int64_t id = static_cast<int64_t>(checks().size());
  ids().emplace(std::move(key), id);
  return id;
}

void record_range_assert(Program& p, int values, int64_t low, int64_t high, const int64_t* ignore,
                         int64_t id) {
  TensorView flag{flag_storage(p.device()), hlo::ElementType::kS64, {kFlagElements}, {1}, 0};
  lowering::Attrs attrs;
  attrs.set("low", low).set("high", high);
  if (ignore != nullptr) attrs.set("ignore", *ignore);
  int checked = p.apply("assert_in_range", {p.read(flag), values, p.scalar(hlo::ElementType::kS64, &id)},
                        std::move(attrs));
  p.write(flag, checked);
}

void raise_failed_asserts(int device) {
  std::unique_lock<std::recursive_mutex> device_lock = lock_device(device);
  std::shared_ptr<pjrt::Buffer> buffer;
  Flag* f;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = flags().find(device);
    if (it == flags().end()) return;
    f = &it->second;
    buffer = f->storage->buffer();
    if (!buffer || buffer == f->read || f->storage->pending() != nullptr) return;
  }
  int64_t value[kFlagElements] = {0, 0};
  buffer->to_host(value, sizeof(value));
  AssertCheck failed;
  {
    std::lock_guard<std::mutex> lock(mutex);
    f->read = buffer;
    if (value[0] <= 0 || value[0] > static_cast<int64_t>(checks().size())) return;
    failed = checks()[value[0] - 1];
  }
  // Reported once: the flag starts over.
  int64_t zeros[kFlagElements] = {0, 0};
  f->storage->set_buffer(Runtime::get().upload(zeros, hlo::ElementType::kS64, {kFlagElements}, device),
                         hlo::ElementType::kS64);
  {
    std::lock_guard<std::mutex> lock(mutex);
    f->read = f->storage->buffer();
  }
  std::string message = failed.message;
  size_t at = message.find("{}");
  if (at != std::string::npos) message.replace(at, 2, std::to_string(value[1]));
  raiser(failed.index_error, message);
}

void set_assert_raiser(AssertRaiser r) { raiser = r; }

}  // namespace torchtpu::engine
