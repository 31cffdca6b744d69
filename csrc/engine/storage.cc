#include "engine/storage.h"

#include <array>
#include <atomic>

#include "engine/address_space.h"
#include "engine/runtime.h"

namespace torchtpu::engine {
namespace {

constexpr int kMaxDevices = 64;

struct Counters {
  std::atomic<int64_t> in_use{0};
  std::atomic<int64_t> peak{0};
};

std::array<Counters, kMaxDevices>& counters() {
  static std::array<Counters, kMaxDevices> c;
  return c;
}

void account(int device, int64_t delta) {
  if (device < 0 || device >= kMaxDevices || delta == 0) return;
  Counters& c = counters()[device];
  int64_t now = c.in_use += delta;
  int64_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
}

int64_t buffer_bytes(const std::shared_ptr<pjrt::Buffer>& buffer, int64_t numel,
                     hlo::ElementType type) {
  return buffer ? numel * static_cast<int64_t>(hlo::byte_width(type)) : 0;
}

std::atomic<uint64_t> serials{0};

}  // namespace

StorageHandle::StorageHandle(int device, size_t nbytes)
    : device_(device),
      nbytes_(nbytes),
      address_(reserve_address_range(nbytes)),
      serial_(serials++) {}

uint64_t next_storage_serial() { return serials.load(); }

StorageHandle::~StorageHandle() {
  if (in_forked_child()) {
    // The buffer belongs to the parent's PJRT client, which did not survive the fork.
    new std::shared_ptr<pjrt::Buffer>(std::move(buffer_));
    return;
  }
  if (pending() != nullptr) forget_storage(this);  // only a program can clear it meanwhile
  account(device_, -buffer_bytes(buffer_, numel(type_), type_));
  release_address_range(address_, nbytes_);
}

void StorageHandle::set_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::ElementType type) {
  int64_t before = buffer_bytes(buffer_, numel(type_), type_);
  buffer_ = std::move(buffer);
  host_copy_.reset();
  type_ = type;
  account(device_, buffer_bytes(buffer_, numel(type_), type_) - before);
}

StorageBytes storage_bytes(int device) {
  if (device < 0 || device >= kMaxDevices) return {};
  return StorageBytes{counters()[device].in_use.load(), counters()[device].peak.load()};
}

void reset_peak_storage_bytes(int device) {
  if (device < 0 || device >= kMaxDevices) return;
  counters()[device].peak = counters()[device].in_use.load();
}

}  // namespace torchtpu::engine
