// The "tpu" ATen kernels, registered in registration.cc. Each translates its at::Tensor
// arguments into an engine program; none holds lowering logic of its own.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "hlo/fingerprint.h"

namespace c10 {
class OperatorHandle;
}

namespace torchtpu::aten {

// Factories and storage (ops_storage.cc).
at::Tensor empty(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                 std::optional<at::Layout> layout, std::optional<at::Device> device,
                 std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format);
at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                         std::optional<at::Device> device, std::optional<bool> pin_memory);
at::Tensor efficient_zero_tensor(at::IntArrayRef size, std::optional<at::ScalarType> dtype,
                                 std::optional<at::Layout> layout,
                                 std::optional<at::Device> device,
                                 std::optional<bool> pin_memory);
at::Tensor tril_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                        std::optional<at::Device> device, std::optional<bool> pin_memory);
at::Tensor triu_indices(int64_t row, int64_t col, int64_t offset,
                        std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                        std::optional<at::Device> device, std::optional<bool> pin_memory);
const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format);
at::Tensor& set_storage(at::Tensor& self, at::Storage source, int64_t storage_offset,
                        at::IntArrayRef size, at::IntArrayRef stride);
at::Tensor& set_empty(at::Tensor& self);
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from);

// Copies, fills and reads to the host (ops_copy.cc).
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking);
at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst);
// Makes pinned CPU tensor `src`'s memory the contents of tpu tensor `dst` (same shape and dtype,
// `dst` covering its storage) without a copy where the plugin can use host memory in place; else
// copies it (non_blocking). The caller gives `src` up: it may not write it again.
void adopt_pinned(const at::Tensor& src, const at::Tensor& dst);

// torch._assert_async as a device-side check (ops_assert.cc).
void assert_async(const at::Tensor& self);
void assert_async_msg(const at::Tensor& self, c10::string_view assert_msg);
// Device-side checks for `op` ("aten::multinomial"): each flag (a bool or integer tpu tensor)
// must hold only zeros, else its message is raised as a RuntimeError at the next wait.
void assert_zero(const char* op, const std::vector<std::pair<at::Tensor, std::string>>& flags);

// A boxed kernel's arguments, taken off the stack (lowered_kernel.cc).
std::vector<c10::IValue> take_arguments(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Scaled dot-product attention as one op (ops_attention.cc): the backend's choice for
// F.scaled_dot_product_attention (an at::SDPBackend value), and the kernels of
// _scaled_dot_product_fused_attention_overrideable and its backward.
int64_t choose_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa);
void attention_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void attention_backward_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Writes `outputs` (tpu tensors of the module's result types and shapes) with the results of the
// module registered under `entry` (lowering/inline_module.h) called on `inputs`
// (ops_call_module.cc).
void call_module(const std::string& entry, const std::vector<at::Tensor>& inputs,
                 const std::vector<at::Tensor>& outputs);
at::Scalar local_scalar_dense(const at::Tensor& self);
at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value);
at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value);
at::Tensor& zero_(at::Tensor& self);

// Random numbers from the device generator (ops_random.cc).
at::Tensor& uniform_(at::Tensor& self, double from, double to, std::optional<at::Generator> gen);
at::Tensor& normal_(at::Tensor& self, double mean, double std, std::optional<at::Generator> gen);
at::Tensor& bernoulli_float(at::Tensor& self, double p, std::optional<at::Generator> gen);
at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p,
                             std::optional<at::Generator> gen);
at::Tensor bernoulli(const at::Tensor& self, std::optional<at::Generator> gen);
at::Tensor& random_from_to(at::Tensor& self, int64_t from, std::optional<int64_t> to,
                           std::optional<at::Generator> gen);
at::Tensor& random_to(at::Tensor& self, int64_t to, std::optional<at::Generator> gen);
at::Tensor& random_(at::Tensor& self, std::optional<at::Generator> gen);
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p,
                                                  std::optional<bool> train);
at::Tensor& exponential_(at::Tensor& self, double lambd, std::optional<at::Generator> gen);
at::Tensor& geometric_(at::Tensor& self, double p, std::optional<at::Generator> gen);
at::Tensor& log_normal_(at::Tensor& self, double mean, double std,
                        std::optional<at::Generator> gen);
at::Tensor& cauchy_(at::Tensor& self, double median, double sigma,
                    std::optional<at::Generator> gen);
at::Tensor normal_tensor_float(const at::Tensor& mean, double std,
                               std::optional<at::Generator> gen);
at::Tensor& normal_tensor_float_out(const at::Tensor& mean, double std,
                                    std::optional<at::Generator> gen, at::Tensor& out);
at::Tensor normal_float_tensor(double mean, const at::Tensor& std,
                               std::optional<at::Generator> gen);
at::Tensor& normal_float_tensor_out(double mean, const at::Tensor& std,
                                    std::optional<at::Generator> gen, at::Tensor& out);
at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std,
                                std::optional<at::Generator> gen);
at::Tensor& normal_tensor_tensor_out(const at::Tensor& mean, const at::Tensor& std,
                                     std::optional<at::Generator> gen, at::Tensor& out);
at::Tensor& bernoulli_out(const at::Tensor& self, std::optional<at::Generator> gen,
                          at::Tensor& out);
at::Tensor multinomial(const at::Tensor& self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen);
at::Tensor& multinomial_out(const at::Tensor& self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out);
at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out);
at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                            const at::Scalar& upper, bool training,
                            std::optional<at::Generator> gen);
at::Tensor& rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const at::Scalar& lower,
                              const at::Scalar& upper, bool training,
                              std::optional<at::Generator> gen);
at::Tensor standard_gamma(const at::Tensor& self, std::optional<at::Generator> gen);
at::Tensor sample_dirichlet(const at::Tensor& self, std::optional<at::Generator> gen);
at::Tensor poisson(const at::Tensor& self, std::optional<at::Generator> gen);
at::Tensor binomial(const at::Tensor& count, const at::Tensor& prob,
                    std::optional<at::Generator> gen);
// Their meta kernels (PyTorch has none).
at::Tensor sample_dirichlet_meta(const at::Tensor& self, std::optional<at::Generator> gen);
at::Tensor binomial_meta(const at::Tensor& count, const at::Tensor& prob,
                         std::optional<at::Generator> gen);
at::Tensor& rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise,
                                 const at::Scalar& lower, const at::Scalar& upper, bool training,
                                 std::optional<at::Generator> gen, at::Tensor& out);

// Ops with value-dependent result shapes, which wait for the device once (ops_data_dependent.cc).
at::Tensor nonzero(const at::Tensor& self);
at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out);
at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask);
at::Tensor& masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out);
bool equal(const at::Tensor& self, const at::Tensor& other);
at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights,
                    int64_t minlength);
void unique_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs,
                                                   const at::Tensor& targets,
                                                   const at::Tensor& input_lengths,
                                                   const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity);
at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs,
                                    const at::Tensor& targets, const at::Tensor& input_lengths,
                                    const at::Tensor& target_lengths,
                                    const at::Tensor& neg_log_likelihood,
                                    const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity);

// Histograms, on the CPU only in PyTorch (ops_histogram.cc).
std::tuple<at::Tensor, at::Tensor> histogram_bin_ct(const at::Tensor& self, int64_t bins,
                                                    std::optional<at::ArrayRef<double>> range,
                                                    const std::optional<at::Tensor>& weight,
                                                    bool density);
std::tuple<at::Tensor&, at::Tensor&> histogram_bin_ct_out(const at::Tensor& self, int64_t bins,
                                                          std::optional<at::ArrayRef<double>> range,
                                                          const std::optional<at::Tensor>& weight,
                                                          bool density, at::Tensor& hist,
                                                          at::Tensor& bin_edges);
std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor(const at::Tensor& self,
                                                         const at::Tensor& bins,
                                                         const std::optional<at::Tensor>& weight,
                                                         bool density);
std::tuple<at::Tensor&, at::Tensor&> histogram_bins_tensor_out(
    const at::Tensor& self, const at::Tensor& bins, const std::optional<at::Tensor>& weight,
    bool density, at::Tensor& hist, at::Tensor& bin_edges);
std::vector<at::Tensor> histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins,
                                              std::optional<at::ArrayRef<double>> range,
                                              const std::optional<at::Tensor>& weight,
                                              bool density);
at::Tensor histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins,
                                    std::optional<at::ArrayRef<double>> range,
                                    const std::optional<at::Tensor>& weight, bool density);
at::Tensor histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins,
                                        const std::optional<at::Tensor>& weight, bool density);

// Their outputs' shapes, for tracing: PyTorch has no meta functions for them.
std::tuple<at::Tensor, at::Tensor> histogram_bin_ct_meta(const at::Tensor& self, int64_t bins,
                                                         std::optional<at::ArrayRef<double>> range,
                                                         const std::optional<at::Tensor>& weight,
                                                         bool density);
std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor_meta(
    const at::Tensor& self, const at::Tensor& bins, const std::optional<at::Tensor>& weight,
    bool density);
std::vector<at::Tensor> histogramdd_bin_edges_meta(const at::Tensor& self, at::IntArrayRef bins,
                                                   std::optional<at::ArrayRef<double>> range,
                                                   const std::optional<at::Tensor>& weight,
                                                   bool density);
at::Tensor histogramdd_from_bin_cts_meta(const at::Tensor& self, at::IntArrayRef bins,
                                         std::optional<at::ArrayRef<double>> range,
                                         const std::optional<at::Tensor>& weight, bool density);
at::Tensor histogramdd_from_bin_tensors_meta(const at::Tensor& self, at::TensorList bins,
                                             const std::optional<at::Tensor>& weight, bool density);
// Linear algebra (ops_linalg.cc): the legacy cholesky, which checks its factorization.
at::Tensor cholesky(const at::Tensor& self, bool upper);
at::Tensor& cholesky_out(const at::Tensor& self, bool upper, at::Tensor& out);
// addr_, which PyTorch's composite would let resize its self, and addbmm_, which resizes it.
at::Tensor& addr_(at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2,
                  const at::Scalar& beta, const at::Scalar& alpha);
at::Tensor& addbmm_(at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                    const at::Scalar& beta, const at::Scalar& alpha);
// det and slogdet return the LU of A^T where PyTorch's kernels do (a contiguous real A), which
// their backward formulas expect: A's argument becomes A^T there.
void prepare_linalg_arguments(const c10::OperatorHandle& op, std::vector<c10::IValue>& args);

// Every op bound to a lowering rule (lowered_kernel.cc).
void lowered_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Records `rule` on the op's arguments (operands and attributes as for lowered_kernel) writing
// `outputs` (undefined ones skipped), and runs it. `signature`, where given, is a key that fixes
// the op's attributes and outputs' geometry (lowered_kernel's meta-cache key); without it, one is
// made of the arguments and outputs.
void run_rule(const std::string& rule, const c10::FunctionSchema& schema,
              const std::vector<c10::IValue>& args, const std::vector<at::Tensor>& outputs,
              c10::Device device, const hlo::Fingerprint* signature = nullptr);

// Checks the index arguments of the indexing ops (advanced indexing's index list: types, devices,
// mask and broadcast shapes, index_put's values; index_select's index) with PyTorch's errors. When
// the index list holds masks or CPU index tensors, replaces each mask by the coordinates of its
// true elements, moves CPU indices to the device, and calls the op again on the stack. False when
// the op is left to run as it is (index_arguments.cc).
bool prepare_index_arguments(const c10::OperatorHandle& op, std::vector<c10::IValue>& args,
                             torch::jit::Stack* stack);

// Convolutions and batch norm, whose shapes torchtpu computes itself (ops_conv.cc).
void convolution_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void convolution_backward_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void batch_norm_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// out= forms through their functional forms' tpu kernels (ops_out.cc): the overloads, and the
// kernel.
const std::vector<std::string>& out_forms_of_functional_kernels();
void out_form_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The ATen overloads ("add.Tensor", ...) the generic kernel serves: those the rules name ("exp.*"
// for every overload of exp and exp_), less composite ones (they decompose, keeping autograd) and
// those with argument kinds it does not take (they stay on the CPU fallback).
std::vector<std::string> lowered_operators();

// Nested tensors (ops_nested.cc). `PaddedNested`: a nested tensor of B matrices [n_b, E] seen as
// a padded [B, L, E] tensor, matrix b being the first n_b rows of batch b, and those lengths.
struct PaddedNested {
  at::Tensor padded;
  std::vector<int64_t> lengths;
};
// The padded tensor a nested tensor is a view of, if it is one (what nested_view_of_padded makes).
std::optional<PaddedNested> padded_nested(const at::Tensor& nested);
// Where the padded tensor is not the nested one's: [B, L], true from row lengths[b] of batch b.
at::Tensor padding_positions(const PaddedNested& p);
// The same, or else a padded copy of a nested tensor of matrices of one width; none for others.
std::optional<PaddedNested> to_padded_nested(const at::Tensor& nested);
// The nested tensor of the first lengths[b] rows of each padded[b], a view of `padded`
// (contiguous).
at::Tensor nested_view_of_padded(const at::Tensor& padded, const std::vector<int64_t>& lengths);
// A nested tensor with its matrices packed one after another (itself, if they already are).
at::Tensor contiguous_nested(const at::Tensor& nested);

// Ops without a lowering run on the CPU (fallback.cc).
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The same for ops on nested tpu tensors, through their NestedTensorCPU kernels.
void nested_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Whether host ops are on and a call on `tensors` reads and writes only small integer or boolean
// tensors outside a capture: what may run on the host (host_ops.cc).
bool small_integer_work(const std::vector<const at::Tensor*>& tensors);
// Runs the call on PyTorch's CPU kernel, pushing its results, when it is small integer work whose
// shapes keep changing at its Python line, or whose tensors hold values made on the host
// (host_ops.cc); returns whether it did. `key`: the meta function's key of the call.
bool run_on_host_when_shapes_vary(const c10::OperatorHandle& op,
                                  const std::vector<c10::IValue>& args,
                                  const std::vector<const at::Tensor*>& tensors,
                                  const hlo::Fingerprint& key, torch::jit::Stack* stack);
// Runs a factory (a call reading no tensor; `tensors`: its out= tensors) on PyTorch's CPU kernel,
// pushing its results, when its `outputs` (dtype and bytes each) are small integer tensors, tiny
// or of shapes that keep changing at its line; returns whether it did.
bool make_on_host(const c10::OperatorHandle& op, const std::vector<c10::IValue>& args,
                  const std::vector<const at::Tensor*>& tensors, const hlo::Fingerprint& key,
                  const std::vector<std::pair<at::ScalarType, size_t>>& outputs,
                  torch::jit::Stack* stack);
// Whether new contents of these dtypes and sizes, made from scalars, are made on the host; counts
// them in host_ops() when they are.
bool made_on_host(const std::vector<std::pair<at::ScalarType, size_t>>& outputs);
// Whether a call of `op` on `tensors` (`key`: what a program for it would be compiled for, less
// offsets and storage sizes) is small integer work to run on the host, its shapes changing at its
// call site; counts it in host_ops() when it is.
bool runs_on_host(const std::string& op, const std::vector<const at::Tensor*>& tensors,
                  hlo::Fingerprint key);
uint64_t host_ops();  // calls run on the host that way so far
void set_host_ops(bool on);  // TORCHTPU_HOST_OPS
// While one lives, this thread's reads to the host are an op's run on the host: they wait for
// the work writing the storages they read, not for all the device's deferred work.
struct HostOpReads {
  HostOpReads();
  ~HostOpReads();
};
bool reading_for_host_op();
// Whether `t`'s storage holds values an op run on the host made, still current (ops_copy.cc).
bool held_on_host(const at::Tensor& t);
// Adds a tensor argument's dtype, device kind, sizes and strides to a cache key
// (lowered_kernel.cc).
void add_tensor_key(hlo::Fingerprint& f, const at::Tensor& t);
// Whether `t`'s values are on the device outside any pending program: a read to the host waits
// at most for their computation, already launched, and cuts no program (ops_copy.cc). Not whether
// that computation is done: where ops run must not depend on timing, or a line's shapes would be
// counted differently from run to run, and compile differently.
bool readable_at_once(const at::Tensor& t);
void set_cpu_fallback_policy(const std::string& policy);  // "warn" or "error"
std::vector<std::pair<std::string, int64_t>> cpu_fallback_counts();

}  // namespace torchtpu::aten
