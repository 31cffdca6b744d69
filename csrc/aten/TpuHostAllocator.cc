#include "aten/TpuHostAllocator.h"

#include <c10/util/Exception.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>

namespace torchtpu::aten {
namespace {

// Page-aligned: a plugin may then map or DMA the memory directly (and XLA's CPU client wants
// at least 64-byte alignment to read host memory in place).
constexpr size_t kAlignment = 4096;

// Freed blocks kept for reuse, by size, up to this many bytes: a new block page-faults on its first
// write, which for large ones costs as much as the copy it serves (CUDA caches pinned memory too).
constexpr size_t kCacheBytes = size_t{1} << 30;

struct HostBlock;

std::mutex& blocks_mutex() {
  static std::mutex m;
  return m;
}

// The live blocks by start address, for is_pinned of any address inside one.
std::map<uintptr_t, std::weak_ptr<HostBlock>>& blocks() {
  static auto* b = new std::map<uintptr_t, std::weak_ptr<HostBlock>>();  // outlives statics
  return *b;
}

struct FreeBlocks {
  std::multimap<size_t, void*> by_size;
  size_t bytes = 0;
};

FreeBlocks& free_blocks() {  // guarded by blocks_mutex()
  static auto* f = new FreeBlocks();  // outlives statics
  return *f;
}

// A cached block of exactly `size` bytes, or null.
void* reuse(size_t size) {
  std::lock_guard<std::mutex> lock(blocks_mutex());
  FreeBlocks& f = free_blocks();
  auto it = f.by_size.find(size);
  if (it == f.by_size.end()) return nullptr;
  void* data = it->second;
  f.by_size.erase(it);
  f.bytes -= size;
  return data;
}

// Frees every cached block (before an allocation that failed is tried again).
void release_cached() {
  std::lock_guard<std::mutex> lock(blocks_mutex());
  FreeBlocks& f = free_blocks();
  for (auto& [size, data] : f.by_size) std::free(data);
  f.by_size.clear();
  f.bytes = 0;
}

void* allocate_block(size_t size) {
  void* data = reuse(size);
  if (data != nullptr) return data;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (posix_memalign(&data, kAlignment, size) == 0 && data != nullptr) return data;
    release_cached();
  }
  return nullptr;
}

struct HostBlock {
  void* data;
  size_t size;
  // Runs once nothing holds the block: no tensor, and no copy or device buffer still reading it.
  ~HostBlock() {
    {
      std::lock_guard<std::mutex> lock(blocks_mutex());
      auto it = blocks().find(reinterpret_cast<uintptr_t>(data));
      if (it != blocks().end() && it->second.expired()) blocks().erase(it);
      FreeBlocks& f = free_blocks();
      if (f.bytes + size <= kCacheBytes) {
        f.by_size.emplace(size, data);
        f.bytes += size;
        return;
      }
    }
    std::free(data);
  }
};

std::shared_ptr<HostBlock> find_block(const void* ptr) {
  auto address = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(blocks_mutex());
  auto it = blocks().upper_bound(address);
  if (it == blocks().begin()) return nullptr;
  --it;
  std::shared_ptr<HostBlock> block = it->second.lock();
  if (!block || address >= it->first + block->size) return nullptr;
  return block;
}

void delete_block_ref(void* ctx) { delete static_cast<std::shared_ptr<HostBlock>*>(ctx); }

class TpuHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) return {nullptr, nullptr, &delete_block_ref, c10::Device(c10::kCPU)};
    size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
    void* data = allocate_block(rounded);
    if (data == nullptr) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "torchtpu: cannot allocate ", nbytes,
                       " bytes of pinned host memory");
    }
    std::shared_ptr<HostBlock> block(new HostBlock{data, rounded});
    {
      std::lock_guard<std::mutex> lock(blocks_mutex());
      blocks()[reinterpret_cast<uintptr_t>(data)] = block;
    }
    return {data, new std::shared_ptr<HostBlock>(std::move(block)), &delete_block_ref,
            c10::Device(c10::kCPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

}  // namespace

c10::Allocator* host_allocator() {
  static TpuHostAllocator allocator;
  return &allocator;
}

bool is_pinned(const void* ptr) { return ptr != nullptr && find_block(ptr) != nullptr; }

std::shared_ptr<const void> pinned_block(const void* ptr) {
  if (ptr == nullptr) return nullptr;
  return find_block(ptr);
}

}  // namespace torchtpu::aten
