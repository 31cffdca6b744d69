// Nested tensors on tpu, as nn.TransformerEncoder's inference fast path makes them of a padded
// batch and its key padding mask (`_nested_tensor_from_mask`), runs its layers on them
// (ops_transformer.cc) and pads them back (`to_padded_tensor`). The CPU and CUDA pack the valid
// rows into one buffer; on an XLA device that would make every program's shape the batch's total
// length, so each new set of lengths would compile again. A nested tensor torchtpu makes is
// instead a view of a padded [B, L, E] tensor (matrix b: the first n_b rows of batch b), and the
// work runs at the padded shapes, the lengths being a mask. Other nested ops run on the CPU
// (fallback.cc), on contiguous copies, as the CPU's kernels expect.
#include <ATen/NestedTensorImpl.h>
#include <ATen/ops/_to_copy_native.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/detach_native.h>
#include <ATen/ops/empty_like_native.h>
#include <ATen/ops/select_native.h>
#include <ATen/ops/transpose_native.h>
#include <ATen/ops/unsqueeze_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <c10/util/Exception.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "aten/ops.h"

namespace torchtpu::aten {
namespace {

at::Tensor cpu_longs(const std::vector<int64_t>& values, int64_t columns) {
  int64_t rows = columns == 0 ? 0 : static_cast<int64_t>(values.size()) / columns;
  return at::tensor(values, at::kLong).view({rows, columns});
}

// Matrix b of a nested tensor, a strided view of its storage.
at::Tensor component(const at::Tensor& nested, int64_t b) {
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(nested);
  const at::Tensor &sizes = impl->get_nested_sizes(), &strides = impl->get_nested_strides();
  int64_t dims = sizes.dim() == 2 ? sizes.size(1) : 0;
  const int64_t* size = sizes.const_data_ptr<int64_t>() + b * dims;
  const int64_t* stride = strides.const_data_ptr<int64_t>() + b * dims;
  return impl->get_unsafe_storage_as_tensor().as_strided(
      at::IntArrayRef(size, dims), at::IntArrayRef(stride, dims),
      impl->get_storage_offsets().const_data_ptr<int64_t>()[b]);
}

int64_t batch_of(const at::Tensor& nested) {
  const at::Tensor& sizes = at::native::get_nested_tensor_impl(nested)->get_nested_sizes();
  return sizes.dim() == 2 ? sizes.size(0) : 0;
}

void check_padding_mask(const at::Tensor& t, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "Expected mask to be of ScalarType Bool, but got ",
              mask.scalar_type(), " instead.");
  TORCH_CHECK(mask.dim() == 2, "Padding mask should be 2D");
  TORCH_CHECK(t.dim() == 3, "Input should be a 3D tensor, N * L * D");
  TORCH_CHECK(t.size(0) == mask.size(0) && t.size(1) == mask.size(1),
              "Mask size should match input size");
}

// Each row's count of true entries, and whether every row has its true entries first, read in
// one transfer. (An empty row dimension raises select's IndexError, as on the CPU.)
std::pair<std::vector<int64_t>, bool> mask_rows(const at::Tensor& mask) {
  int64_t rows = mask.size(0), length = mask.size(1);
  at::Tensor counts = mask.cumsum(1, at::kLong).select(1, length - 1);
  at::Tensor after_a_false = mask.narrow(1, 0, length - 1).logical_not();
  at::Tensor gaps = mask.narrow(1, 1, length - 1).logical_and(after_a_false).any(1).to(at::kLong);
  at::Tensor both = at::stack({counts, gaps}).cpu();
  const int64_t* values = both.const_data_ptr<int64_t>();
  return {std::vector<int64_t>(values, values + rows),
          std::all_of(values + rows, values + 2 * rows, [](int64_t g) { return g == 0; })};
}

bool nested_tensor_from_mask_left_aligned(const at::Tensor& t, const at::Tensor& mask) {
  check_padding_mask(t, mask);
  return mask_rows(mask).second;
}

at::Tensor nested_tensor_from_mask(const at::Tensor& t, const at::Tensor& mask, bool mask_check) {
  check_padding_mask(t, mask);
  auto [lengths, left_aligned] = mask_rows(mask);
  TORCH_CHECK(!mask_check || left_aligned, "Mask must be left-aligned without gaps");
  TORCH_CHECK(t.size(0) > 0, "stack expects a non-empty TensorList");
  return nested_view_of_padded(t.clone(at::MemoryFormat::Contiguous), lengths);
}

// A tensor of `size` filled with `padding` in `like`'s dtype, converted as the CPU converts it
// (2.7 pads an integer tensor with 2; NaN or 1e20 there is an overflow error).
at::Tensor filled(at::IntArrayRef size, double padding, const at::Tensor& like) {
  at::Tensor value = at::empty({}, at::TensorOptions(like.scalar_type())).fill_(padding);
  return value.to(like.device()).expand(size).contiguous();
}

at::Tensor to_padded_tensor(const at::Tensor& nested, double padding,
                            at::OptionalIntArrayRef output_size) {
  int64_t batch = batch_of(nested), elements = 0;
  std::vector<int64_t> size = {batch};
  if (batch > 0) {
    const at::Tensor& sizes = at::native::get_nested_tensor_impl(nested)->get_nested_sizes();
    at::Tensor largest = std::get<0>(sizes.max(0));
    size.insert(size.end(), largest.const_data_ptr<int64_t>(),
                largest.const_data_ptr<int64_t>() + largest.numel());
    elements = sizes.prod(1).sum().item<int64_t>();
    TORCH_CHECK(elements > 0,
                "to_padded_tensor: at least one constituent tensor should have non-zero numel");
  }
  if (output_size.has_value()) {
    TORCH_CHECK(output_size->size() == size.size(),
                "Length of output_size does not match NestedTensor dims. Broadcasting is not "
                "supported.");
    for (size_t d = 0; d < size.size(); ++d) {
      TORCH_CHECK((*output_size)[d] >= size[d],
                  "Value in output_size is less than NestedTensor padded size. Truncation is not "
                  "supported.");
    }
  }
  at::IntArrayRef out_size = output_size.has_value() ? *output_size : at::IntArrayRef(size);
  // As on the CPU, the padding value is converted only where some element is padding.
  if (c10::multiply_integers(out_size) == elements) padding = 0;
  if (std::optional<PaddedNested> p = padded_nested(nested)) {
    // At the padded tensor's own shape, whatever the lengths, so new lengths compile nothing.
    at::Tensor masked = at::where(padding_positions(*p).unsqueeze(2),
                                  filled({}, padding, nested), p->padded);
    if (out_size.equals(masked.sizes())) return masked;
    int64_t rows = std::min(out_size[1], masked.size(1));
    masked = masked.narrow(1, 0, rows);
    if (out_size[1] == rows && out_size[0] == batch && out_size[2] == size[2]) {
      return masked.contiguous();
    }
    at::Tensor out = filled(out_size, padding, nested);
    out.narrow(0, 0, batch).narrow(1, 0, rows).narrow(2, 0, size[2]).copy_(masked);
    return out;
  }
  at::Tensor out = filled(out_size, padding, nested);
  for (int64_t b = 0; b < batch; ++b) {
    at::Tensor part = component(nested, b), into = out.select(0, b);
    for (int64_t d = 0; d < part.dim(); ++d) into = into.narrow(d, 0, part.size(d));
    into.copy_(part);
  }
  return out;
}

// Copies between devices and dtypes: PyTorch's, which take packed matrices, on a packed copy.
at::Tensor to_copy(const at::Tensor& self, std::optional<at::ScalarType> dtype,
                   std::optional<at::Layout> layout, std::optional<at::Device> device,
                   std::optional<bool> pin_memory, bool non_blocking,
                   std::optional<at::MemoryFormat> memory_format) {
  return at::native::_to_copy_nested(contiguous_nested(self), dtype, layout, device, pin_memory,
                                     non_blocking, memory_format);
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (!self.is_nested() || !src.is_nested() || (self.is_contiguous() && src.is_contiguous())) {
    return at::native::copy_nested_(self, src, non_blocking);
  }
  const at::native::NestedTensorImpl* to = at::native::get_nested_tensor_impl(self);
  const at::native::NestedTensorImpl* from = at::native::get_nested_tensor_impl(src);
  TORCH_CHECK(at::equal(to->get_nested_sizes(), from->get_nested_sizes()),
              "copy_ only supports tensors that are the same size for Nested implementations");
  for (int64_t b = 0; b < batch_of(self); ++b) {
    component(self, b).copy_(component(src, b), non_blocking);
  }
  return self;
}

// How PyTorch's CPU fallback hands back what an op wrote (x.mul_(2) of a nested x runs on the
// CPU): into the tpu nested tensor, which the op cannot have resized.
at::Tensor copy_back(const at::Tensor& self, const at::Tensor& dst) {
  at::Tensor into = dst;
  return copy_(into, self, false);
}

// unbind(0) and select(0, i): each component a view of the nested tensor's storage, as
// PyTorch's kernels make them of a packed buffer (theirs take the buffer's length from the
// components, too short for torchtpu's view of a padded tensor).
std::vector<at::Tensor> unbind(const at::Tensor& self, int64_t dim) {
  TORCH_CHECK(at::maybe_wrap_dim(dim, self.dim()) == 0,
              "NestedTensor can only be unbound along dimension 0 ", "got dimension ", dim,
              " instead.");
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < batch_of(self); ++b) parts.push_back(component(self, b));
  return parts;
}

at::Tensor select(const at::Tensor& self, int64_t dim, int64_t index) {
  if (at::maybe_wrap_dim(dim, self.dim()) != 0) {
    return at::native::select_nested(self, dim, index);
  }
  int64_t batch = batch_of(self);
  TORCH_CHECK_INDEX(index >= -batch && index < batch, "index ", index,
                    " is out of bounds for dimension 0 with size ", batch);
  return component(self, index < 0 ? index + batch : index);
}

}  // namespace

at::Tensor nested_view_of_padded(const at::Tensor& padded, const std::vector<int64_t>& lengths) {
  int64_t batch = padded.size(0), rows = padded.size(1), width = padded.size(2);
  std::vector<int64_t> sizes, strides, offsets;
  for (int64_t b = 0; b < batch; ++b) {
    sizes.insert(sizes.end(), {lengths[b], width});
    strides.insert(strides.end(), {width, 1});
    offsets.push_back(padded.storage_offset() + b * rows * width);
  }
  at::Tensor buffer = padded.view(-1);
  return at::detail::make_tensor<at::native::NestedTensorImpl>(
      buffer, cpu_longs(sizes, 2), cpu_longs(strides, 2), at::tensor(offsets, at::kLong));
}

std::optional<PaddedNested> padded_nested(const at::Tensor& nested) {
  const at::native::NestedTensorImpl* impl = at::native::get_nested_tensor_impl(nested);
  const at::Tensor& sizes = impl->get_nested_sizes();
  if (sizes.dim() != 2 || sizes.size(1) != 2 || sizes.size(0) == 0) return std::nullopt;
  int64_t batch = sizes.size(0);
  const int64_t* size = sizes.const_data_ptr<int64_t>();
  const int64_t* stride = impl->get_nested_strides().const_data_ptr<int64_t>();
  const int64_t* offset = impl->get_storage_offsets().const_data_ptr<int64_t>();
  int64_t width = size[1];
  std::vector<int64_t> lengths;
  int64_t rows = 0;
  for (int64_t b = 0; b < batch; ++b) {
    lengths.push_back(size[2 * b]);
    rows = std::max(rows, size[2 * b]);
  }
  int64_t step = batch > 1 ? offset[1] - offset[0] : rows * width;
  if (width <= 0 || step < rows * width || step % width != 0) return std::nullopt;
  for (int64_t b = 0; b < batch; ++b) {
    if (size[2 * b + 1] != width || offset[b] != offset[0] + b * step ||
        (size[2 * b] > 1 && stride[2 * b] != width) || stride[2 * b + 1] != 1) {
      return std::nullopt;
    }
  }
  at::Tensor storage = impl->get_unsafe_storage_as_tensor();
  if (offset[0] + batch * step > storage.numel()) return std::nullopt;
  return PaddedNested{storage.as_strided({batch, step / width, width}, {step, width, 1}, offset[0]),
                      lengths};
}

at::Tensor padding_positions(const PaddedNested& p) {
  at::Tensor lengths = at::tensor(p.lengths, at::kLong).to(p.padded.device());
  return at::arange(p.padded.size(1), lengths.options()).ge(lengths.unsqueeze(1));
}

std::optional<PaddedNested> to_padded_nested(const at::Tensor& nested) {
  if (std::optional<PaddedNested> p = padded_nested(nested)) return p;
  const at::Tensor& sizes = at::native::get_nested_tensor_impl(nested)->get_nested_sizes();
  if (sizes.dim() != 2 || sizes.size(1) != 2 || sizes.size(0) == 0) return std::nullopt;
  at::Tensor widths = sizes.select(1, 1);
  if (!widths.eq(widths[0]).all().item<bool>()) return std::nullopt;
  at::Tensor padded = to_padded_tensor(nested, 0.0, std::nullopt);
  at::Tensor lengths = sizes.select(1, 0).contiguous();
  return PaddedNested{padded, std::vector<int64_t>(lengths.const_data_ptr<int64_t>(),
                                                   lengths.const_data_ptr<int64_t>() +
                                                       lengths.numel())};
}

at::Tensor contiguous_nested(const at::Tensor& nested) {
  int64_t batch = batch_of(nested);
  if (batch == 0 || at::native::nested_tensor_impl_is_contiguous(
                        at::native::get_nested_tensor_impl(nested))) {
    return nested;
  }
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < batch; ++b) parts.push_back(component(nested, b).reshape(-1));
  return at::detail::make_tensor<at::native::NestedTensorImpl>(
      at::cat(parts), at::native::get_nested_tensor_impl(nested)->get_nested_sizes().clone());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_nested_tensor_from_mask", TORCH_FN(nested_tensor_from_mask));
  m.impl("_nested_tensor_from_mask_left_aligned", TORCH_FN(nested_tensor_from_mask_left_aligned));
}

TORCH_LIBRARY_IMPL(aten, NestedTensorPrivateUse1, m) {
  m.impl("to_padded_tensor", TORCH_FN(to_padded_tensor));
  m.impl("_to_copy", TORCH_FN(to_copy));
  m.impl("empty_like", TORCH_FN(at::native::empty_like_nested));
  m.impl("copy_", TORCH_FN(copy_));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_back));
  // Views (run on a CPU copy, the parts of x.unbind() were copies, and writes through them were
  // lost): PyTorch's nested kernels for the others only describe the buffer anew (sizes,
  // strides, offsets), on any device and layout.
  m.impl("unbind.int", TORCH_FN(unbind));
  m.impl("select.int", TORCH_FN(select));
  m.impl("alias", TORCH_FN(at::native::alias_nested));
  m.impl("detach", TORCH_FN(at::native::detach));
  m.impl("transpose.int", TORCH_FN(at::native::transpose_nested));
  m.impl("unsqueeze", TORCH_FN(at::native::unsqueeze_nested));
}

}  // namespace torchtpu::aten
