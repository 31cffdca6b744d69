#include "engine/address_space.h"

#include <sys/mman.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace torchtpu::engine {
namespace {

// Ranges are handed out in power-of-two size classes and reused after release, so the region
// (address space only: PROT_NONE and MAP_NORESERVE pages cost no memory) lasts forever.
class AddressSpace {
 public:
  AddressSpace() {
    for (size_t size = size_t{1} << 44; size >= (size_t{1} << 32); size >>= 1) {
      void* p = mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) {
        base_ = reinterpret_cast<uintptr_t>(p);
        size_ = size;
        break;
      }
    }
    if (base_ == 0) throw std::bad_alloc();
  }

  void* reserve(size_t nbytes) {
    int size_class = class_of(nbytes);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& free = free_[size_class];
    if (!free.empty()) {
      uintptr_t p = free.back();
      free.pop_back();
      return reinterpret_cast<void*>(p);
    }
    size_t bytes = size_t{1} << size_class;
    if (next_ + bytes > size_) throw std::bad_alloc();
    uintptr_t p = base_ + next_;
    next_ += bytes;
    return reinterpret_cast<void*>(p);
  }

  void release(void* address, size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_[class_of(nbytes)].push_back(reinterpret_cast<uintptr_t>(address));
  }

  bool contains(const void* address) const {
    auto p = reinterpret_cast<uintptr_t>(address);
    return p >= base_ && p < base_ + size_;
  }

 private:
  static int class_of(size_t nbytes) {
    int c = 6;  // 64-byte alignment, as PyTorch's CPU allocator
    while ((size_t{1} << c) < nbytes) ++c;
    return c;
  }

  uintptr_t base_ = 0;
  size_t size_ = 0;
  size_t next_ = 0;
  std::mutex mutex_;
  std::map<int, std::vector<uintptr_t>> free_;
};

AddressSpace& space() {
  static AddressSpace* s = new AddressSpace();  // never destroyed: storages outlive statics
  return *s;
}

}  // namespace

void* reserve_address_range(size_t nbytes) {
  return nbytes == 0 ? nullptr : space().reserve(nbytes);
}

void release_address_range(void* address, size_t nbytes) {
  if (address != nullptr) space().release(address, nbytes);
}

bool is_device_address(const void* address) { return space().contains(address); }

}  // namespace torchtpu::engine
