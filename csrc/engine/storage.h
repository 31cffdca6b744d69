// The storage handle: what every tensor and view of one device storage shares. PJRT buffers are
// immutable; in-place ops, out= ops and copy_ replace the handle's buffer instead.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "hlo/types.h"
#include "pjrt/buffer.h"

namespace torchtpu::engine {

class Program;

class StorageHandle {
 public:
  StorageHandle(int device, size_t nbytes);
  StorageHandle(const StorageHandle&) = delete;
  StorageHandle& operator=(const StorageHandle&) = delete;
  ~StorageHandle();

  int device() const { return device_; }
  size_t nbytes() const { return nbytes_; }
  void* address() const { return address_; }

  // The contents: one flat buffer of `numel(type)` elements of `type()`, or none when the storage
  // was never written (it reads as zeros).
  const std::shared_ptr<pjrt::Buffer>& buffer() const { return buffer_; }
  hlo::ElementType type() const { return type_; }
  void set_buffer(std::shared_ptr<pjrt::Buffer> buffer, hlo::ElementType type);
  // The buffer's contents on the host, when an op run on the host made them (csrc/aten/
  // host_ops.cc): the next such op reads them without a download. Null otherwise; a new buffer
  // drops it.
  const std::shared_ptr<const void>& host_copy() const { return host_copy_; }
  void set_host_copy(std::shared_ptr<const void> bytes) { host_copy_ = std::move(bytes); }
  // Elements of `type` the storage holds.
  int64_t numel(hlo::ElementType type) const {
    return static_cast<int64_t>(nbytes_ / hlo::byte_width(type));
  }

  // The deferred program that reads or writes this storage and has not run yet, if any: its
  // buffer is not current until that program runs. Set and cleared under the device's
  // recording lock (eager.h); atomic because a storage being destroyed reads it first without.
  // `slot` is where that program keeps its state of this storage (Program's own numbering).
  Program* pending() const { return pending_.load(std::memory_order_acquire); }
  size_t pending_slot() const { return pending_slot_; }
  void set_pending(Program* program, size_t slot = 0) {
    pending_slot_ = slot;
    pending_.store(program, std::memory_order_release);
  }

  // Storages are numbered in the order they were made, so a capture can tell which it created.
  uint64_t serial() const { return serial_; }
  // Persistent: not any tensor's storage but state that lives as long as the process (a random
  // generator's), which a replayed program reads and replaces in place.
  bool persistent() const { return persistent_; }
  void set_persistent() { persistent_ = true; }

 private:
  int device_;
  size_t nbytes_;
  void* address_;
  std::shared_ptr<pjrt::Buffer> buffer_;
  std::shared_ptr<const void> host_copy_;
  hlo::ElementType type_ = hlo::ElementType::kU8;
  std::atomic<Program*> pending_{nullptr};
  size_t pending_slot_ = 0;
  uint64_t serial_;
  bool persistent_ = false;
};

// The serial the next storage made will get.
uint64_t next_storage_serial();

// Tells the pending program that refers to `storage`, if any, that the storage is gone (defined
// with the eager modes). It takes the device's recording lock first: another thread may be
// running that program, and destroying it, meanwhile.
void forget_storage(StorageHandle* storage);

// Bytes held by storage buffers on a device, for torch.tpu.memory_allocated when the plugin keeps
// no statistics of its own.
struct StorageBytes {
  int64_t in_use = 0;
  int64_t peak = 0;
};
StorageBytes storage_bytes(int device);
void reset_peak_storage_bytes(int device);

}  // namespace torchtpu::engine
