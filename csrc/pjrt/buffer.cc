#include "pjrt/buffer.h"

#include <cstring>

#include "pjrt/client.h"

namespace torchtpu::pjrt {

Buffer::~Buffer() {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_Destroy_Args, args);
  args.buffer = buffer_;
  plugin_->api()->PJRT_Buffer_Destroy(&args);
  host_done_.reset();  // after the buffer: its destruction is what readies it on the CPU plugin
}

void Buffer::borrow_host_memory(std::unique_ptr<Event> done, std::shared_ptr<const void> keep) {
  done->on_ready([keep = std::move(keep)](const std::string&) mutable { keep.reset(); });
  host_done_ = std::move(done);
}

PJRT_Buffer_Type Buffer::element_type() const {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_ElementType_Args, args);
  args.buffer = buffer_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_ElementType, &args);
  return args.type;
}

std::vector<int64_t> Buffer::dimensions() const {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_Dimensions_Args, args);
  args.buffer = buffer_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_Dimensions, &args);
  return std::vector<int64_t>(args.dims, args.dims + args.num_dims);
}

size_t Buffer::on_device_size() const {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, args);
  args.buffer = buffer_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_OnDeviceSizeInBytes, &args);
  return args.on_device_size_in_bytes;
}

void Buffer::to_host(void* dst, size_t dst_size) const {
  if (!read_in_place(dst, dst_size)) to_host_async(dst, dst_size)->await();
}

// The CPU plugin's transfer hands each copy to one of its threads and waits for it: tens of
// microseconds of thread switches, even for one element. Its buffers are host memory, laid out as
// the transfer would copy them when their size on the device is the size asked for, so once the
// buffer is ready its bytes are copied here directly.
bool Buffer::read_in_place(void* dst, size_t dst_size) const {
  if (!plugin_->provides(&PJRT_Api::PJRT_Buffer_IsOnCpu) ||
      !plugin_->provides(&PJRT_Api::PJRT_Buffer_UnsafePointer)) {
    return false;
  }
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_IsOnCpu_Args, on_cpu);
  on_cpu.buffer = buffer_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_IsOnCpu, &on_cpu);
  if (!on_cpu.is_on_cpu || on_device_size() != dst_size) return false;
  await_ready();
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_UnsafePointer_Args, pointer);
  pointer.buffer = buffer_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_UnsafePointer, &pointer);
  if (pointer.buffer_pointer == 0) return false;
  std::memcpy(dst, reinterpret_cast<const void*>(pointer.buffer_pointer), dst_size);
  return true;
}

std::unique_ptr<Event> Buffer::to_host_async(void* dst, size_t dst_size) const {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = dst_size;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_ToHostBuffer, &args);
  return std::make_unique<Event>(plugin_, args.event);
}

void Buffer::await_ready() const {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args, args);
  args.buffer = buffer_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_ReadyEvent, &args);
  Event(plugin_, args.event).await();
}

bool Buffer::is_deleted() const {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_IsDeleted_Args, args);
  args.buffer = buffer_;
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_IsDeleted, &args);
  return args.is_deleted;
}

std::unique_ptr<Buffer> Buffer::copy_to(const Device& device) const {
  TORCHTPU_PJRT_ARGS(PJRT_Buffer_CopyToDevice_Args, args);
  args.buffer = buffer_;
  args.dst_device = device.raw();
  TORCHTPU_PJRT_CALL(*plugin_, PJRT_Buffer_CopyToDevice, &args);
  return std::make_unique<Buffer>(plugin_, args.dst_buffer);
}

}  // namespace torchtpu::pjrt
