// The "tpu" allocator: a DataPtr whose context is an engine::StorageHandle and whose address is
// synthetic (never dereferenced on the host).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

#include "engine/storage.h"

namespace torchtpu::aten {

c10::Allocator* tpu_allocator();
// A new storage handle on `device` wrapped in a DataPtr.
c10::DataPtr allocate_on(int device, size_t nbytes);
// The handle behind a "tpu" storage; throws if the storage was not made by torchtpu.
engine::StorageHandle& storage_handle(const c10::Storage& storage);
// Resizes `storage` to `nbytes`, keeping its contents (new bytes read as zero).
void resize_storage(const c10::Storage& storage, size_t nbytes);

}  // namespace torchtpu::aten
