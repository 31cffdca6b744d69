// Moving data: host<->device and device<->device copies, fills, and reading a scalar.
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>

#include "aten/TpuHostAllocator.h"
#include "aten/ops.h"
#include "aten/tensor_view.h"
#include "engine/compile_log.h"
#include "engine/device_asserts.h"
#include "engine/eager.h"
#include "engine/runtime.h"
#include "engine/trace.h"

namespace torchtpu::aten {
namespace {

lowering::Attrs cast_to(const at::Tensor& t) {
  return lowering::Attrs()
      .set_type("type", element_type(t.scalar_type()))
      .set("shape", std::vector<int64_t>(t.sizes().begin(), t.sizes().end()));
}

// `value` with the lazy conjugate / negative bits of `t` applied (both are involutions, so this
// also turns a value into what a conj or neg view must store).
int resolved(engine::Program& p, int value, const at::Tensor& t) {
  if (!t.is_conj() && !t.is_neg()) return value;
  return p.apply("resolve", {value},
                 lowering::Attrs().set("conj", int64_t{t.is_conj()}).set("neg", int64_t{t.is_neg()}));
}

// The tensor's elements as a dense row-major buffer of its dtype. A tensor that is its whole
// storage is served by the storage's own buffer; anything else runs one program.
std::shared_ptr<pjrt::Buffer> dense_buffer(const at::Tensor& t) {
  engine::flush(t.device().index());  // a read to the host: deferred work runs first
  engine::locate_compiles();
  engine::TensorView v = view_of(t);
  if (v.covers_storage() && v.storage->buffer() && v.storage->type() == v.type &&
      !t.is_conj() && !t.is_neg()) {
    return v.storage->buffer();
  }
  engine::Program p(t.device().index());
  p.result(resolved(p, p.read(v), t));
  std::shared_ptr<pjrt::Buffer> buffer = p.run().at(0);
  engine::locate_compiles();
  return buffer;
}

// A part of a small storage (an element of a vector, the last column of a sequence that grows)
// read to the host: the whole storage is downloaded and viewed there, so reading it compiles no
// program of its own, one per offset. Undefined when the storage is too large for that, or is
// the tensor's whole (dense_buffer serves that). For an op run on the host (host_ops.cc), a whole
// storage too, and only the work that writes this storage runs first.
constexpr size_t kWholeStorageReadBytes = 256 << 10;

at::Tensor read_through_storage(const at::Tensor& t) {
  engine::TensorView v = view_of(t);
  bool for_host_op = reading_for_host_op();
  if (!for_host_op || v.storage->pending() != nullptr) engine::flush(t.device().index());
  if ((v.covers_storage() && !for_host_op) || !v.storage->buffer() ||
      v.storage->type() != v.type || v.storage->nbytes() > kWholeStorageReadBytes ||
      t.is_conj() || t.is_neg()) {
    return {};
  }
  at::Tensor whole;
  if (for_host_op && v.storage->host_copy() && v.storage->pending() == nullptr) {
    std::shared_ptr<const void> bytes = v.storage->host_copy();
    whole = at::from_blob(const_cast<void*>(bytes.get()), {v.storage->numel(v.type)},
                          [bytes](void*) {}, t.options().device(at::kCPU));
  } else {
    whole = at::empty({v.storage->numel(v.type)}, t.options().device(at::kCPU));
    engine::trace::to_host(*v.storage->buffer(), whole.data_ptr(), whole.nbytes(),
                           t.device().index());
  }
  return whole.as_strided(v.sizes, v.strides, v.offset);
}

// non_blocking into pinned memory (as CUDA): the copy is started, and `dst` holds the values
// once synchronize() or an event recorded after it is done. Otherwise it waits.
void copy_to_cpu(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  engine::EngineWork work;  // the wait for the device
  engine::capture_breaks_because("it copies a tpu tensor to the CPU (.cpu(), .item(), printing, "
                                 "a value-dependent shape)");
  bool direct = dst.is_contiguous() && dst.scalar_type() == src.scalar_type() &&
                dst.sizes() == src.sizes() && !dst.is_conj() && !dst.is_neg();
  std::shared_ptr<const void> pinned =
      non_blocking && direct ? pinned_block(dst.data_ptr()) : nullptr;
  if (pinned && src.numel() > 0) {
    engine::Runtime::get().download_async(dense_buffer(src), dst.data_ptr(), dst.nbytes(),
                                          src.device().index(), std::move(pinned));
    return;
  }
  at::Tensor host = direct ? dst : at::empty(src.sizes(), dst.options().dtype(src.scalar_type()));
  at::Tensor viewed = src.numel() > 0 ? read_through_storage(src) : at::Tensor();
  if (viewed.defined()) {
    host.copy_(viewed);
  } else if (src.numel() > 0) {
    engine::trace::to_host(*dense_buffer(src), host.data_ptr(), host.nbytes(),
                           src.device().index());
  }
  engine::raise_failed_asserts(src.device().index());  // a wait: as CUDA's, it reports them
  if (!direct) dst.copy_(host);
}

// non_blocking from pinned memory (as CUDA): the upload may still read `src` after this returns;
// synchronize() and events wait for it. From other memory, or through a conversion, it copies
// before returning.
void copy_from_cpu(const at::Tensor& src, const at::Tensor& dst, bool non_blocking) {
  at::Tensor host =
      src.resolve_conj().resolve_neg().to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  engine::TensorView v = view_of(dst);
  int device = dst.device().index();
  std::vector<int64_t> dims(dst.sizes().begin(), dst.sizes().end());
  std::shared_ptr<const void> pinned =
      non_blocking && host.data_ptr() == src.data_ptr() ? pinned_block(src.data_ptr()) : nullptr;
  auto upload = [&](const std::vector<int64_t>& shape) {
    engine::Runtime& runtime = engine::Runtime::get();
    return pinned ? runtime.upload_async(host.data_ptr(), v.type, shape, device, pinned)
                  : runtime.upload(host.data_ptr(), v.type, shape, device);
  };
  // A whole-storage upload replaces the buffer, except in a capture, where the write must be part
  // of the program.
  if (v.covers_storage() && !dst.is_conj() && !dst.is_neg() && v.storage->pending() == nullptr &&
      !engine::capturing()) {
    v.storage->set_buffer(upload({v.numel()}), v.type);
    // An op run on the host keeps its results there too, for the next one (host_ops.cc).
    if (reading_for_host_op()) v.storage->set_host_copy({host.data_ptr(), [host](void*) {}});
    return;
  }
  auto uploaded = upload(dims);
  engine::Recording recording(device);
  engine::Program& p = recording.program();
  p.write(v, resolved(p, p.argument(std::move(uploaded), hlo::Shape{v.type, dims}), dst));
  recording.finish();
}

bool made_or_filled_on_host(const at::Tensor& self) {
  if (!small_integer_work({&self})) return false;  // before any key: fills are a hot path
  if (made_on_host({{self.scalar_type(), self.nbytes()}})) return true;
  hlo::Fingerprint key;
  key.add(static_cast<int64_t>(self.scalar_type()));
  key.add_ints(self.sizes().data(), self.sizes().size());
  return runs_on_host("fill_", {&self}, std::move(key));
}

// A copy of small integer views whose shapes keep changing at the call site goes through the
// host (host_ops.cc), compiling nothing.
bool copied_through_host(const at::Tensor& src, const at::Tensor& dst) {
  if (src.device() != dst.device() || src.is_conj() || src.is_neg() ||
      !small_integer_work({&src, &dst})) {
    return false;  // before any key: copies are a hot path
  }
  hlo::Fingerprint key;
  add_tensor_key(key, src);
  add_tensor_key(key, dst);
  if (!runs_on_host("copy_", {&src, &dst}, std::move(key))) return false;
  HostOpReads reads;
  at::Tensor host = at::empty(src.sizes(), src.options().device(at::kCPU));
  copy_to_cpu(src, host, false);
  copy_from_cpu(host, dst, false);
  return true;
}

void copy_on_device(const at::Tensor& src, const at::Tensor& dst) {
  engine::TensorView from = view_of(src), to = view_of(dst);
  // Same elements, same type: share the (immutable) buffer instead of copying it.
  // (Not in a capture: there the copy must be part of the program.)
  bool plain = !src.is_conj() && !src.is_neg() && !dst.is_conj() && !dst.is_neg() &&
               from.storage->pending() == nullptr && to.storage->pending() == nullptr &&
               !engine::capturing();
  if (plain && from.covers_storage() && to.covers_storage() && from.type == to.type &&
      src.sizes() == dst.sizes() && from.storage->buffer() &&
      from.storage->type() == from.type && src.device() == dst.device()) {
    to.storage->set_buffer(from.storage->buffer(), from.type);
    return;
  }
  if (copied_through_host(src, dst)) return;
  std::shared_ptr<pjrt::Buffer> moved;
  if (src.device() != dst.device()) {
    moved = dense_buffer(src)->copy_to(engine::Runtime::get().device(dst.device().index()));
  }
  engine::Recording recording(dst.device().index());
  engine::Program& p = recording.program();
  int value = moved ? p.argument(std::move(moved),
                                 hlo::Shape{from.type, std::vector<int64_t>(src.sizes().begin(),
                                                                            src.sizes().end())})
                    : resolved(p, p.read(from), src);
  p.write(to, resolved(p, p.apply("cast", {value}, cast_to(dst)), dst));
  recording.finish();
}

}  // namespace

bool readable_at_once(const at::Tensor& t) {
  engine::StorageHandle* storage = view_of(t).storage;
  return storage->pending() == nullptr && storage->buffer() && !t.is_conj() && !t.is_neg();
}

bool held_on_host(const at::Tensor& t) {
  engine::StorageHandle* storage = view_of(t).storage;
  return storage->host_copy() && storage->pending() == nullptr && !t.is_conj() && !t.is_neg();
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (dst.numel() == 0) return dst;
  if (dst.is_privateuseone()) at::assert_no_internal_overlap(dst);
  if (self.is_privateuseone() && dst.is_privateuseone()) at::assert_no_partial_overlap(dst, self);
  if (self.is_privateuseone() && dst.is_cpu()) {
    copy_to_cpu(self, dst, non_blocking);
  } else if (self.is_cpu() && dst.is_privateuseone()) {
    copy_from_cpu(self, dst, non_blocking);
  } else if (self.is_privateuseone() && dst.is_privateuseone()) {
    copy_on_device(self, dst);
  } else {
    TORCH_CHECK(false, "torchtpu: cannot copy from ", self.device(), " to ", dst.device(),
                "; copy through the CPU");
  }
  return dst;
}

void adopt_pinned(const at::Tensor& src, const at::Tensor& dst) {
  TORCH_CHECK(src.is_cpu() && dst.is_privateuseone() && src.sizes() == dst.sizes(),
              "torchtpu: adopt_pinned takes a CPU tensor and a tpu tensor of the same shape");
  std::shared_ptr<const void> pinned = pinned_block(src.data_ptr());
  engine::TensorView v = view_of(dst);
  if (pinned == nullptr || src.scalar_type() != dst.scalar_type() || !src.is_contiguous() ||
      !v.covers_storage() || dst.is_conj() || dst.is_neg() || src.is_conj() || src.is_neg() ||
      v.storage->pending() != nullptr || engine::capturing()) {
    copy_from(src, dst, /*non_blocking=*/pinned != nullptr);
    return;
  }
  v.storage->set_buffer(engine::Runtime::get().adopt_host(src.data_ptr(), v.type, {v.numel()},
                                                          dst.device().index(), pinned),
                        v.type);
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty(self.sizes(), self.options().device(at::kCPU));
  copy_to_cpu(self, host, false);
  return host.item();
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  // A small integer fill of a whole tensor is made on the host (host_ops.cc): always when tiny,
  // else where the line's shapes keep changing.
  engine::TensorView v = view_of(self);
  if (v.covers_storage() && v.storage->pending() == nullptr && !self.is_neg() &&
      !self.is_conj() && made_or_filled_on_host(self)) {
    HostOpReads reads;  // keeps the values on the host too
    copy_from_cpu(at::full(self.sizes(), value, self.options().device(at::kCPU)), self, false);
    return self;
  }
  engine::Recording recording(self.device().index());
  engine::Program& p = recording.program();
  int scalar = scalar_argument(p, value, self.scalar_type());
  p.write(view_of(self), p.apply("cast", {scalar}, cast_to(self)));
  recording.finish();
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ",
              value.dim(), " dimensions.");
  if (value.is_cpu()) return fill_scalar(self, value.item());
  common_device({&self, &value});
  if (self.numel() == 0) return self;
  engine::Recording recording(self.device().index());
  engine::Program& p = recording.program();
  p.write(view_of(self), p.apply("cast", {p.read(view_of(value))}, cast_to(self)));
  recording.finish();
  return self;
}

at::Tensor& zero_(at::Tensor& self) { return fill_scalar(self, 0); }

}  // namespace torchtpu::aten
