#include "aten/TpuAllocator.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>

#include "aten/TpuGuard.h"
#include "engine/eager.h"
#include "engine/program.h"
#include "engine/runtime.h"

namespace torchtpu::aten {
namespace {

// The live handles by address, for storages that wrap a tpu address without owning it
// (`at::from_blob` of a storage's data pointer, as PyTorch's pickling of a storage does).
std::mutex live_mutex;
std::unordered_map<const void*, engine::StorageHandle*> live;

void delete_handle(void* context) {
  auto* handle = static_cast<engine::StorageHandle*>(context);
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    live.erase(handle->address());
  }
  delete handle;
}

class TpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override { return allocate_on(current_device(), nbytes); }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "torchtpu: tpu storages cannot be copied byte-wise on the host; "
                       "copy the tensors instead (dst.copy_(src))");
  }
};

TpuAllocator allocator;

}  // namespace

c10::Allocator* tpu_allocator() { return &allocator; }

c10::DataPtr allocate_on(int device, size_t nbytes) {
  engine::refuse_in_forked_child();
  auto* handle = new engine::StorageHandle(device, nbytes);
  {
    std::lock_guard<std::mutex> lock(live_mutex);
    live[handle->address()] = handle;
  }
  return c10::DataPtr(handle->address(), handle, &delete_handle,
                      c10::Device(c10::DeviceType::PrivateUse1,
                                  static_cast<c10::DeviceIndex>(device)));
}

engine::StorageHandle& storage_handle(const c10::Storage& storage) {
  const c10::DataPtr& ptr = storage.data_ptr();
  if (ptr.get_deleter() == &delete_handle && ptr.get_context() != nullptr) {
    return *static_cast<engine::StorageHandle*>(ptr.get_context());
  }
  // A storage made from a live storage's address (at::from_blob) is that storage's handle; one
  // whose bytes reach past that storage's is not.
  std::lock_guard<std::mutex> lock(live_mutex);
  auto found = live.find(ptr.get());
  TORCH_CHECK(found != live.end() && storage.nbytes() <= found->second->nbytes(),
              "torchtpu: this storage was not allocated by torchtpu");
  return *found->second;
}

void resize_storage(const c10::Storage& storage, size_t nbytes) {
  TORCH_CHECK(storage.resizable(), "Trying to resize storage that is not resizable");
  engine::StorageHandle& old = storage_handle(storage);
  if (nbytes == old.nbytes()) return;
  // Its contents must be current before they move (pending work writing them runs first).
  if (old.pending() != nullptr) engine::flush(old.device());
  c10::DataPtr grown = allocate_on(old.device(), nbytes);
  auto* handle = static_cast<engine::StorageHandle*>(grown.get_context());
  if (old.buffer()) {
    hlo::ElementType type = old.type();
    engine::Program p(old.device());
    int flat = p.read(engine::TensorView{&old, type, {old.numel(type)}, {1}, 0});
    int resized = p.apply("resize_flat", {flat},
                          lowering::Attrs().set("numel", handle->numel(type)));
    p.write(engine::TensorView{handle, type, {handle->numel(type)}, {1}, 0}, resized);
    p.run();
  }
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(std::move(grown));
  impl->set_nbytes(nbytes);
}

}  // namespace torchtpu::aten
