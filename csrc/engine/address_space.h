// Synthetic data pointers for device storages: non-overlapping ranges of one reserved,
// inaccessible (PROT_NONE) region. PyTorch compares data_ptr ranges for overlap and aliasing
// checks; a stray host read of one faults at once instead of corrupting memory.
#pragma once

#include <cstddef>

namespace torchtpu::engine {

// Returns the start of a fresh range of `nbytes` (nullptr for 0 bytes). Thread-safe.
void* reserve_address_range(size_t nbytes);
void release_address_range(void* address, size_t nbytes);
// Whether `address` lies in the reserved region (a pointer torchtpu handed out).
bool is_device_address(const void* address);

}  // namespace torchtpu::engine
