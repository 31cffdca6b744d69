// Histograms: histogram and the parts of histogramdd, which PyTorch implements on the CPU only.
// The checks and their messages are the CPU's, but for a range taken from the data: the device
// finds it, so nothing waits, and a device-side check refuses one that is not finite. The edges are
// a linspace on the device, the counts the "histogramdd" rule (csrc/lowering/search.cc).
#include <ATen/native/Resize.h>
#include <ATen/ops/any.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/linspace.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/irange.h>

#include <cmath>
#include <limits>
#include <string>

#include "aten/ops.h"
#include "aten/tensor_view.h"
#include "aten/value_checks.h"
#include "engine/eager.h"

namespace torchtpu::aten {
namespace {

// The "histogramdd" rule's bin searches: corrected linear interpolation for edges made by
// linspace, the last edge not above the value for edges given.
constexpr int64_t kLocalSearch = 1, kEdgeSearch = 2;

// `self` as M points in N dimensions: (M, N).
at::Tensor points(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.histogramdd: input tensor should have at least 2 dimensions");
  int64_t n = self.size(-1);
  int64_t m = 1;
  for (int64_t d = 0; d + 1 < self.dim(); ++d) m *= self.size(d);
  return self.reshape({m, n});
}

// The CPU kernel's dtypes (the outer edges of data take only float and double).
void check_dtype(const at::Tensor& x, const char* name, bool narrow_floats) {
  at::ScalarType t = x.scalar_type();
  bool ok = t == at::kFloat || t == at::kDouble ||
            (narrow_floats && (t == at::kHalf || t == at::kBFloat16));
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", name, "\" not implemented for '", c10::toString(t), "'");
}

// histogramdd_check_inputs: `x` holds points of N dimensions in its last, one sequence of edges
// per dimension.
void check_inputs(const at::Tensor& x, at::TensorList bins,
                  const std::optional<at::Tensor>& weight) {
  int64_t n = x.size(-1);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == n, "torch.histogramdd: expected ", n,
              " sequences of bin edges for a ", n, "-dimensional histogram but got ", bins.size());
  for (const auto d : c10::irange(n)) {
    const at::Tensor& edges = bins[d];
    TORCH_CHECK(x.dtype() == edges.dtype(),
                "torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
                "got input with dtype ",
                x.dtype(), " and bins for dimension ", d, " with dtype ", edges.dtype());
    TORCH_CHECK(edges.dim() == 1,
                "torch.histogramdd: bins tensor should have one dimension, but got ", edges.dim(),
                " dimensions in the bins tensor for dimension ", d);
    TORCH_CHECK(edges.numel() > 0,
                "torch.histogramdd: bins tensor should have at least 1 element, but got ",
                edges.numel(), " elements in the bins tensor for dimension ", d);
  }
  if (!weight.has_value()) return;
  TORCH_CHECK(x.dtype() == weight->dtype(),
              "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor "
              "should have the same dtype, but got input(",
              x.dtype(), "), and weight(", weight->dtype(), ")");
  std::vector<int64_t> expected(x.sizes().begin(), x.sizes().end() - 1);
  std::vector<int64_t> sizes(weight->sizes().begin(), weight->sizes().end());
  if (sizes.empty()) sizes = {1};
  TORCH_CHECK(expected == sizes,
              "torch.histogramdd: if weight tensor is provided it should have the same shape as "
              "the input tensor excluding its innermost dimension, but got input with shape ",
              x.sizes(), " and weight with shape ", weight->sizes());
}

// histogramdd_prepare_out's checks of the outputs.
void check_outputs(const at::Tensor& x, at::IntArrayRef bins, const at::Tensor& hist,
                   at::TensorList edges) {
  TORCH_CHECK(x.dtype() == hist.dtype(),
              "torch.histogram: input tensor and hist tensor should have the same dtype, but got "
              "input ",
              x.dtype(), " and hist ", hist.dtype());
  for (const auto d : c10::irange(bins.size())) {
    if (d < edges.size()) {
      TORCH_CHECK(x.dtype() == edges[d].dtype(),
                  "torch.histogram: input tensor and bin_edges tensor should have the same dtype, "
                  "but got input ",
                  x.dtype(), " and bin_edges ", edges[d].dtype(), " for dimension ", d);
    }
    TORCH_CHECK(bins[d] > 0, "torch.histogram(): bins must be > 0, but got ", bins[d],
                " for dimension ", d);
  }
}

// NaN as the CPU prints it in its messages.
double shown(double v) { return std::isnan(v) ? std::numeric_limits<double>::quiet_NaN() : v; }

// select_outer_bin_edges for a given range, or for no data ([0, 1]): each dimension's first and
// last edge, widened by 0.5 each side when they are equal.
std::vector<std::pair<double, double>> outer_edges(int64_t n,
                                                   std::optional<at::ArrayRef<double>> range) {
  std::vector<std::pair<double, double>> ends(n, {0.0, 1.0});
  if (range.has_value()) {
    TORCH_CHECK(static_cast<int64_t>(range->size()) == 2 * n, "torch.histogramdd: for a ", n,
                "-dimensional histogram range should have ", 2 * n, " elements, but got ",
                range->size());
    for (const auto d : c10::irange(n)) ends[d] = {(*range)[2 * d], (*range)[2 * d + 1]};
  }
  for (const auto d : c10::irange(n)) {
    auto& [lo, hi] = ends[d];
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogramdd: dimension ", d,
                "'s range [", shown(lo), ", ", shown(hi), "] is not finite");
    TORCH_CHECK(lo <= hi, "torch.histogramdd: min should not exceed max, but got min ", lo, " max ",
                hi, " for dimension ", d);
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
  }
  return ends;
}

// Equal-width edges for each dimension of the points `x` (M, N): bins[d] + 1 of them between its
// outer edges. Those of the data are found on the device, where a check refuses a NaN or an
// infinity among them (the CPU names the range it found; a NaN's is [nan, nan]).
std::vector<at::Tensor> linear_edges(const std::string& op, const at::Tensor& x,
                                     at::IntArrayRef bins,
                                     std::optional<at::ArrayRef<double>> range) {
  int64_t n = x.size(1);
  std::vector<at::Tensor> edges;
  if (range.has_value() || x.numel() == 0) {
    std::vector<std::pair<double, double>> ends = outer_edges(n, range);
    for (const auto d : c10::irange(n)) {
      edges.push_back(at::linspace(ends[d].first, ends[d].second, bins[d] + 1, x.options()));
    }
    return edges;
  }
  check_dtype(x, "histogramdd", false);
  at::Tensor nan = x.isnan().any(0), inf = x.isinf().any(0);
  std::vector<std::pair<at::Tensor, std::string>> flags;
  lowering::Attrs attrs;
  for (const auto d : c10::irange(n)) {
    TORCH_CHECK(bins[d] >= -1, "number of steps must be non-negative");
    std::string dim = "torch.histogramdd: dimension " + std::to_string(d) + "'s range ";
    flags.emplace_back(nan[d], dim + "[nan, nan] is not finite");
    flags.emplace_back(inf[d], dim + "[min, max] is not finite: the input holds an infinity");
    edges.push_back(at::empty({bins[d] + 1}, x.options()));
    std::string suffix = d == 0 ? "" : std::to_string(d);
    attrs.set_type("type" + suffix, element_type(x.scalar_type()))
        .set("shape" + suffix, std::vector<int64_t>{bins[d] + 1});
  }
  std::vector<IndexAssert> asserts = zero_asserts(op, flags);
  engine::Recording recording(x.device().index());
  engine::Program& p = recording.program();
  int first =
      p.apply("histogram_edges", {p.read(view_of(x))}, std::move(attrs), static_cast<int>(n));
  for (const auto d : c10::irange(n)) p.write(view_of(edges[d]), first + static_cast<int>(d));
  record_index_asserts(p, asserts);
  recording.finish();
  return edges;
}

// Writes the histogram of the points `x` (M, N) over `edges` into `hist` (already sized), each
// point counting its weight (a tensor of M) or 1, on the device.
void count_into(const at::Tensor& hist, const at::Tensor& x, at::TensorList edges,
                const std::optional<at::Tensor>& weight, bool density, int64_t search) {
  if (x.numel() == 0) {  // no points, or no dimensions: nothing counted (0 / 0 with density)
    hist.fill_(density ? std::numeric_limits<double>::quiet_NaN() : 0.0);
    return;
  }
  engine::Recording recording(hist.device().index());
  engine::Program& p = recording.program();
  std::vector<int> operands{p.read(view_of(x))};
  for (const at::Tensor& e : edges) operands.push_back(p.read(view_of(e)));
  if (weight.has_value()) operands.push_back(p.read(view_of(weight->reshape({x.size(0)}))));
  lowering::Attrs attrs;
  attrs.set_type("type", element_type(hist.scalar_type()))
      .set("shape", std::vector<int64_t>(hist.sizes().begin(), hist.sizes().end()))
      .set("search", search)
      .set("weighted", int64_t{weight.has_value()})
      .set("density", int64_t{density});
  int counts = p.apply("histogramdd", std::move(operands), std::move(attrs));
  p.write(view_of(hist), counts);
  recording.finish();
}

std::vector<int64_t> bin_counts(at::TensorList edges) {
  std::vector<int64_t> bins;
  for (const at::Tensor& e : edges) bins.push_back(e.numel() - 1);
  return bins;
}

c10::Device device_of(const at::Tensor& self, const std::optional<at::Tensor>& weight) {
  return weight.has_value() ? common_device({&self, &*weight}) : common_device({&self});
}

}  // namespace

std::tuple<at::Tensor&, at::Tensor&> histogram_bin_ct_out(const at::Tensor& self, int64_t bins,
                                                          std::optional<at::ArrayRef<double>> range,
                                                          const std::optional<at::Tensor>& weight,
                                                          bool density, at::Tensor& hist,
                                                          at::Tensor& bin_edges) {
  c10::DeviceGuard guard(device_of(self, weight));
  at::Tensor x = self.reshape({self.numel(), 1});
  std::optional<at::Tensor> w;
  if (weight.has_value()) w = weight->reshape({weight->numel()});
  check_outputs(x, {bins}, hist, {bin_edges});
  std::vector<at::Tensor> edges = linear_edges("aten::histogram", x, {bins}, range);
  check_inputs(x, edges, w);
  check_dtype(x, "histogram_tpu", true);
  at::native::resize_output(hist, {bins});
  at::native::resize_output(bin_edges, {bins + 1});
  bin_edges.copy_(edges[0]);
  count_into(hist, x, edges, w, density, kLocalSearch);
  return {hist, bin_edges};
}

std::tuple<at::Tensor, at::Tensor> histogram_bin_ct(const at::Tensor& self, int64_t bins,
                                                    std::optional<at::ArrayRef<double>> range,
                                                    const std::optional<at::Tensor>& weight,
                                                    bool density) {
  at::Tensor hist = at::empty({0}, self.options()), bin_edges = at::empty({0}, self.options());
  histogram_bin_ct_out(self, bins, range, weight, density, hist, bin_edges);
  return {hist, bin_edges};
}

std::tuple<at::Tensor&, at::Tensor&> histogram_bins_tensor_out(
    const at::Tensor& self, const at::Tensor& bins, const std::optional<at::Tensor>& weight,
    bool density, at::Tensor& hist, at::Tensor& bin_edges) {
  c10::DeviceGuard guard(device_of(self, weight));
  common_device({&self, &bins});
  at::Tensor x = self.reshape({self.numel(), 1});
  std::optional<at::Tensor> w;
  if (weight.has_value()) w = weight->reshape({weight->numel()});
  check_inputs(x, {bins}, w);
  check_outputs(x, {bins.numel() - 1}, hist, {bin_edges});
  check_dtype(x, "histogram_tpu", true);
  at::native::resize_output(hist, {bins.numel() - 1});
  at::native::resize_output(bin_edges, {bins.numel()});
  bin_edges.copy_(bins);
  count_into(hist, x, {bins}, w, density, kEdgeSearch);
  return {hist, bin_edges};
}

std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor(const at::Tensor& self,
                                                         const at::Tensor& bins,
                                                         const std::optional<at::Tensor>& weight,
                                                         bool density) {
  at::Tensor hist = at::empty({0}, self.options()), bin_edges = at::empty({0}, bins.options());
  histogram_bins_tensor_out(self, bins, weight, density, hist, bin_edges);
  return {hist, bin_edges};
}

std::vector<at::Tensor> histogramdd_bin_edges(const at::Tensor& self, at::IntArrayRef bins,
                                              std::optional<at::ArrayRef<double>> range,
                                              const std::optional<at::Tensor>& weight,
                                              bool density) {
  c10::DeviceGuard guard(device_of(self, weight));
  at::Tensor x = points(self);
  TORCH_CHECK(static_cast<int64_t>(bins.size()) == x.size(1),
              "histogramdd: The size of bins must be equal to the innermost dimension of the "
              "input.");
  return linear_edges("aten::histogramdd", x, bins, range);
}

namespace {

// The histogram of `self`'s points over `edges`, one sequence per dimension.
at::Tensor histogramdd_over(const at::Tensor& self, at::TensorList edges,
                            const std::optional<at::Tensor>& weight, bool density, int64_t search) {
  c10::DeviceGuard guard(device_of(self, weight));
  for (const at::Tensor& e : edges) common_device({&self, &e});
  at::Tensor x = points(self);
  check_inputs(self, edges, weight);
  std::vector<int64_t> counts = bin_counts(edges);
  at::Tensor hist = at::empty(counts, self.options());
  check_outputs(x, counts, hist, {});
  check_dtype(x, "histogram_tpu", true);
  count_into(hist, x, edges, weight, density, search);
  return hist;
}

}  // namespace

at::Tensor histogramdd_from_bin_cts(const at::Tensor& self, at::IntArrayRef bins,
                                    std::optional<at::ArrayRef<double>> range,
                                    const std::optional<at::Tensor>& weight, bool density) {
  std::vector<at::Tensor> edges = histogramdd_bin_edges(self, bins, range, weight, density);
  return histogramdd_over(self, edges, weight, density, kLocalSearch);
}

at::Tensor histogramdd_from_bin_tensors(const at::Tensor& self, at::TensorList bins,
                                        const std::optional<at::Tensor>& weight, bool density) {
  return histogramdd_over(self, bins, weight, density, kEdgeSearch);
}

// Their outputs' shapes, for tracing (Dynamo's fake tensors, whose sizes may be symbolic): PyTorch
// has no meta functions for them.
std::tuple<at::Tensor, at::Tensor> histogram_bin_ct_meta(const at::Tensor& self, int64_t bins,
                                                         std::optional<at::ArrayRef<double>>,
                                                         const std::optional<at::Tensor>&, bool) {
  return {at::empty({bins}, self.options()), at::empty({bins + 1}, self.options())};
}

std::tuple<at::Tensor, at::Tensor> histogram_bins_tensor_meta(const at::Tensor& self,
                                                              const at::Tensor& bins,
                                                              const std::optional<at::Tensor>&,
                                                              bool) {
  return {at::empty_symint({bins.sym_numel() - 1}, self.options()),
          at::empty_symint({bins.sym_numel()}, bins.options())};
}

std::vector<at::Tensor> histogramdd_bin_edges_meta(const at::Tensor& self, at::IntArrayRef bins,
                                                   std::optional<at::ArrayRef<double>>,
                                                   const std::optional<at::Tensor>&, bool) {
  std::vector<at::Tensor> edges;
  for (int64_t b : bins) edges.push_back(at::empty({b + 1}, self.options()));
  return edges;
}

at::Tensor histogramdd_from_bin_cts_meta(const at::Tensor& self, at::IntArrayRef bins,
                                         std::optional<at::ArrayRef<double>>,
                                         const std::optional<at::Tensor>&, bool) {
  return at::empty(bins, self.options());
}

at::Tensor histogramdd_from_bin_tensors_meta(const at::Tensor& self, at::TensorList bins,
                                             const std::optional<at::Tensor>&, bool) {
  std::vector<c10::SymInt> counts;
  for (const at::Tensor& e : bins) counts.push_back(e.sym_numel() - 1);
  return at::empty_symint(counts, self.options());
}

}  // namespace torchtpu::aten
