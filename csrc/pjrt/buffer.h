// An owned PJRT_Buffer: an immutable array on one device.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "pjrt/event.h"

namespace torchtpu::pjrt {

class Device;

class Buffer {
 public:
  Buffer(std::shared_ptr<const Plugin> plugin, PJRT_Buffer* buffer)
      : plugin_(std::move(plugin)), buffer_(buffer) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  PJRT_Buffer* raw() const { return buffer_; }
  PJRT_Buffer_Type element_type() const;
  std::vector<int64_t> dimensions() const;
  size_t on_device_size() const;

  // Copies the whole buffer into `dst` (dense, row-major) and waits for the copy.
  void to_host(void* dst, size_t dst_size) const;
  // The same without waiting: `dst` is written once the returned event is ready, and must stay
  // alive until then.
  std::unique_ptr<Event> to_host_async(void* dst, size_t dst_size) const;
  // Waits until the computation producing this buffer has finished (rethrowing its error).
  void await_ready() const;
  // Whether the buffer was deleted, as a donated input of an execution is.
  bool is_deleted() const;
  std::unique_ptr<Buffer> copy_to(const Device& device) const;

  // The buffer uses host memory owned by `keep` until `done` is ready (Client::
  // buffer_adopting_host), which then lets `keep` go.
  void borrow_host_memory(std::unique_ptr<Event> done, std::shared_ptr<const void> keep);
  // Whether it still does: such a buffer may not be donated to a program's output, which would
  // go on using the memory after this buffer (and with it `keep`) is gone.
  bool borrows_host_memory() const { return host_done_ != nullptr && !host_done_->is_ready(); }

 private:
  // to_host without the plugin's transfer, where the buffer is host memory; false elsewhere.
  bool read_in_place(void* dst, size_t dst_size) const;

  std::shared_ptr<const Plugin> plugin_;
  PJRT_Buffer* buffer_;
  std::unique_ptr<Event> host_done_;
};

}  // namespace torchtpu::pjrt
