// Pinned host memory for "tpu" (tensor.pin_memory(), DataLoader(pin_memory=True)): page-aligned
// CPU memory the runtime knows, so a non_blocking copy may read or write it after the call
// returns, keeping it alive until the copy is done even if its tensor is freed first.
#pragma once

#include <c10/core/Allocator.h>

#include <memory>

namespace torchtpu::aten {

c10::Allocator* host_allocator();
// Whether `ptr` lies inside memory host_allocator() handed out and that is still alive.
bool is_pinned(const void* ptr);
// Shared ownership of the pinned block holding `ptr` (null when `ptr` is not pinned).
std::shared_ptr<const void> pinned_block(const void* ptr);

}  // namespace torchtpu::aten
