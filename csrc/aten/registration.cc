// Every "tpu" kernel registration, in one place, top to bottom.
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/impl/alloc_cpu.h>
#include <torch/library.h>

#include "aten/TpuAllocator.h"
#include "aten/ops.h"
#include "lowering/registry.h"

namespace torchtpu::aten {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Factories and storage.
  m.impl("empty.memory_format", TORCH_FN(empty));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_efficientzerotensor", TORCH_FN(efficient_zero_tensor));
  m.impl("tril_indices", TORCH_FN(tril_indices));
  m.impl("triu_indices", TORCH_FN(triu_indices));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));

  // Views change metadata only: PyTorch's own implementations serve.
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));

  // Copies, fills, reads to the host.
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero_));

  // Random numbers, from the device generator.
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor));
  m.impl("bernoulli", TORCH_FN(bernoulli));
  m.impl("random_.from", TORCH_FN(random_from_to));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_", TORCH_FN(random_));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("geometric_", TORCH_FN(geometric_));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tensor_float));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tensor_float_out));
  m.impl("normal.float_Tensor", TORCH_FN(normal_float_tensor));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_float_tensor_out));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tensor_tensor));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tensor_tensor_out));
  m.impl("bernoulli.out", TORCH_FN(bernoulli_out));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
  m.impl("_standard_gamma", TORCH_FN(standard_gamma));
  m.impl("_sample_dirichlet", TORCH_FN(sample_dirichlet));
  m.impl("poisson", TORCH_FN(poisson));
  m.impl("binomial", TORCH_FN(binomial));
  m.impl("rrelu_with_noise", TORCH_FN(rrelu_with_noise));
  m.impl("rrelu_with_noise_", TORCH_FN(rrelu_with_noise_));
  m.impl("rrelu_with_noise.out", TORCH_FN(rrelu_with_noise_out));

  // Convolutions: PyTorch routes a backend's convolutions through these two hooks.
  m.impl("convolution_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution_kernel>());
  m.impl("convolution_backward_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution_backward_kernel>());

  // Attention: F.scaled_dot_product_attention's one-op path (ops_attention.cc).
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&attention_kernel>());
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         torch::CppFunction::makeFromBoxedFunction<&attention_backward_kernel>());

  // Value-dependent shapes: one wait for a count, then the device.
  m.impl("nonzero", TORCH_FN(nonzero));
  m.impl("nonzero.out", TORCH_FN(nonzero_out));
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("masked_select.out", TORCH_FN(masked_select_out));
  m.impl("equal", TORCH_FN(equal));
  m.impl("bincount", TORCH_FN(bincount));
  m.impl("_ctc_loss.Tensor", TORCH_FN(ctc_loss_tensor));
  m.impl("_ctc_loss_backward.Tensor", TORCH_FN(ctc_loss_backward_tensor));
  for (const char* name : {"_unique", "_unique2", "unique_consecutive"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&unique_kernel>());
  }

  // Histograms: on the CPU only in PyTorch.
  m.impl("_assert_async", TORCH_FN(assert_async));
  m.impl("_assert_async.msg", TORCH_FN(assert_async_msg));
  m.impl("histogram.bin_ct", TORCH_FN(histogram_bin_ct));
  m.impl("histogram.bin_ct_out", TORCH_FN(histogram_bin_ct_out));
  m.impl("histogram.bins_tensor", TORCH_FN(histogram_bins_tensor));
  m.impl("histogram.bins_tensor_out", TORCH_FN(histogram_bins_tensor_out));
  m.impl("_histogramdd_bin_edges", TORCH_FN(histogramdd_bin_edges));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(histogramdd_from_bin_cts));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(histogramdd_from_bin_tensors));
  // The legacy cholesky checks its factorization's info, which its lowering alone lacks.
  m.impl("cholesky", TORCH_FN(cholesky));
  m.impl("cholesky.out", TORCH_FN(cholesky_out));
  m.impl("addr_", TORCH_FN(addr_));
  m.impl("addbmm_", TORCH_FN(addbmm_));

  for (const char* name : {"native_batch_norm", "_native_batch_norm_legit",
                           "_native_batch_norm_legit.no_stats",
                           "_native_batch_norm_legit_no_training", "_batch_norm_with_update"}) {
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&batch_norm_kernel>());
  }
  for (const std::string& name : out_forms_of_functional_kernels()) {
    m.impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&out_form_kernel>());
  }

  // Every operator a lowering rule names (csrc/lowering/*.cc): one generic kernel.
  for (const std::string& op : lowered_operators()) {
    m.impl(op.c_str(), torch::CppFunction::makeFromBoxedFunction<&lowered_kernel>());
  }
}

// Output shapes PyTorch has no meta functions for, so Dynamo can trace the ops: histograms, and two
// random ops (which FakeTensor would otherwise run on the device).
TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("_sample_dirichlet", TORCH_FN(sample_dirichlet_meta));
  m.impl("binomial", TORCH_FN(binomial_meta));
  m.impl("histogram.bin_ct", TORCH_FN(histogram_bin_ct_meta));
  m.impl("histogram.bins_tensor", TORCH_FN(histogram_bins_tensor_meta));
  m.impl("_histogramdd_bin_edges", TORCH_FN(histogramdd_bin_edges_meta));
  m.impl("_histogramdd_from_bin_cts", TORCH_FN(histogramdd_from_bin_cts_meta));
  m.impl("_histogramdd_from_bin_tensors", TORCH_FN(histogramdd_from_bin_tensors_meta));
}

// Copies resolve lazy conjugate and negative bits themselves (the generic fallbacks for those
// bits would clone, that is copy, again: endlessly).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

// Everything else runs on the CPU.
TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

// Nested tensors (what nn.TransformerEncoder's inference fast path makes of a padded batch): the
// ops ops_nested.cc does not take run on the CPU.
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&nested_cpu_fallback>());
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, tpu_allocator());

}  // namespace torchtpu::aten
