// Pooling on stablehlo.reduce_window over the trailing spatial dims, and its gradients.
#include <algorithm>

#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

struct Window {
  Dims kernel, stride, padding, dilation;
};

// PyTorch's int[2] arguments may hold one value for every spatial dim.
Dims expand_to(Dims d, size_t n, int64_t fallback) {
  if (d.empty()) d = Dims(n, fallback);
  if (d.size() == 1) d = Dims(n, d[0]);
  return d;
}

Window window(const Attrs& a, size_t n) {
  Window w;
  w.kernel = expand_to(a.ints("kernel_size"), n, 1);
  w.stride = a.has("stride") ? expand_to(a.ints("stride"), n, 1) : w.kernel;
  if (w.stride.empty()) w.stride = w.kernel;
  w.padding = expand_to(a.has("padding") ? a.ints("padding") : Dims{}, n, 0);
  w.dilation = expand_to(a.has("dilation") ? a.ints("dilation") : Dims{}, n, 1);
  return w;
}

// Padding so the windows produce exactly the output size PyTorch chose (ceil_mode included).
std::vector<std::pair<int64_t, int64_t>> paddings(const Dims& in, const Dims& out, const Window& w,
                                                  size_t lead) {
  std::vector<std::pair<int64_t, int64_t>> pads(lead, {0, 0});
  for (size_t i = 0; i < w.kernel.size(); ++i) {
    int64_t size = in[lead + i], o = out[lead + i];
    int64_t span = w.dilation[i] * (w.kernel[i] - 1) + 1;
    int64_t hi = std::max<int64_t>((o - 1) * w.stride[i] + span - size - w.padding[i], 0);
    pads.push_back({w.padding[i], hi});
  }
  return pads;
}

std::string window_attrs(const Window& w, size_t lead,
                         const std::vector<std::pair<int64_t, int64_t>>& pads) {
  Dims dims(lead, 1), strides(lead, 1), dil(lead, 1);
  dims.insert(dims.end(), w.kernel.begin(), w.kernel.end());
  strides.insert(strides.end(), w.stride.begin(), w.stride.end());
  dil.insert(dil.end(), w.dilation.begin(), w.dilation.end());
  return "window_dimensions = " + FunctionBuilder::i64_array(dims) + ", window_strides = " +
         FunctionBuilder::i64_array(strides) + ", window_dilations = " +
         FunctionBuilder::i64_array(dil) + ", padding = " + FunctionBuilder::padding(pads);
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
//   -> (values, indices into each flattened spatial plane)
Values max_pool(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  size_t rank = x.shape.rank(), n = a.ints("kernel_size").size() == 1 ? 2 : a.ints("kernel_size").size();
  size_t lead = rank - n;
  Window w = window(a, n);
  Dims out = out_shape(a);
  auto pads = paddings(x.shape.dims, out, w, lead);
  Dims plane(x.shape.dims.begin() + lead, x.shape.dims.end());
  // Flat position of each element within its spatial plane.
  Value index = full(b, ElementType::kS64, x.shape.dims, 0);
  int64_t scale = 1;
  for (size_t d = rank; d-- > lead;) {
    Value step = binary(b, "stablehlo.multiply", iota(b, ElementType::kS64, x.shape.dims, d),
                        full(b, ElementType::kS64, x.shape.dims, static_cast<double>(scale)));
    index = binary(b, "stablehlo.add", index, step);
    scale *= x.shape.dims[d];
  }
  ElementType t = x.shape.type;
  Shape vs{t, {}}, is{ElementType::kS64, {}};
  auto r = b.op_with_region(
      "stablehlo.reduce_window", {x, index, extreme(b, t, false), constant(b, ElementType::kS64, -1)},
      {Shape{t, out}, Shape{ElementType::kS64, out}}, {vs, is, vs, is},
      [t](FunctionBuilder& r, const std::vector<Value>& args) {
        const Value &v1 = args[0], &i1 = args[1], &v2 = args[2], &i2 = args[3];
        Value take1 = compare(r, v1, v2, "GT");
        Value tie = b_and(r, compare(r, v1, v2, "EQ"),
                          compare(r, i1, i2, "LT"));
        take1 = b_or(r, take1, tie);
        if (hlo::is_floating(t)) {
          // PyTorch's scan keeps a window's last NaN.
          Value nan1 = compare(r, v1, v1, "NE"), nan2 = compare(r, v2, v2, "NE");
          Value nan_pick = select(r, b_and(r, nan1, nan2), compare(r, i1, i2, "GT"), nan1);
          take1 = select(r, b_or(r, nan1, nan2), nan_pick, take1);
        }
        Value valid2 = compare(r, i2, constant(r, ElementType::kS64, 0), "GE");
        Value valid1 = compare(r, i1, constant(r, ElementType::kS64, 0), "GE");
        take1 = b_and(r, valid1, b_or(r, take1, unary(r, "stablehlo.not", valid2)));
        return std::vector<Value>{select(r, take1, v1, v2), select(r, take1, i1, i2)};
      },
      window_attrs(w, lead, pads));
  return {r[0], convert(b, r[1], out_type(a, 1))};
}

// max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
// ceil_mode, indices): each gradient goes to the element its window picked.
Values max_pool_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = convert(b, v[0], c);
  Value indices = convert(b, v[2], ElementType::kS64);
  Dims in = out_shape(a);
  size_t n = a.ints("kernel_size").size() == 1 ? 2 : a.ints("kernel_size").size();
  size_t lead = in.size() - n;
  int64_t planes = 1, plane = 1, windows = 1;
  for (size_t d = 0; d < lead; ++d) planes *= in[d];
  for (size_t d = lead; d < in.size(); ++d) plane *= in[d];
  for (size_t d = lead; d < g.shape.rank(); ++d) windows *= g.shape.dims[d];
  Value flat_g = reshape(b, g, {planes, windows});
  Value flat_i = reshape(b, indices, {planes, windows, 1});
  Value plane_id = iota(b, ElementType::kS64, {planes, windows, 1}, 0);
  Value coords = concatenate(b, {plane_id, flat_i}, 2);
  Value grad = scatter(b, full(b, c, {planes, plane}, 0), coords, flat_g, true,
                       "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
                       "[0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 2>");
  return {convert(b, reshape(b, grad, in), t)};
}

// The divisor of each average-pooling window, as PyTorch counts it.
Value window_counts(FunctionBuilder& b, const Dims& in, const Dims& out, const Window& w,
                    size_t lead, ElementType c, bool count_include_pad) {
  Dims plane(in.begin() + lead, in.end());
  // Ones over the input (and over its padding when it counts), summed per window.
  std::vector<std::pair<int64_t, int64_t>> pads = paddings(in, out, w, lead);
  Value ones = full(b, c, in, 1);
  Value counted = ones;
  std::vector<std::pair<int64_t, int64_t>> used = pads;
  if (count_include_pad) {
    // Padding counts, the ceil_mode overhang past it does not.
    Dims low(in.size(), 0), high(in.size(), 0), padded = in;
    for (size_t i = 0; i < w.kernel.size(); ++i) {
      low[lead + i] = w.padding[i];
      high[lead + i] = w.padding[i];
      padded[lead + i] += 2 * w.padding[i];
    }
    counted = b.op("stablehlo.pad", {ones, constant(b, c, 1)}, Shape{c, padded},
                   "edge_padding_low = " + FunctionBuilder::i64_array(low) +
                       ", edge_padding_high = " + FunctionBuilder::i64_array(high) +
                       ", interior_padding = " + FunctionBuilder::i64_array(Dims(in.size(), 0)));
    for (size_t i = 0; i < w.kernel.size(); ++i) {
      used[lead + i].first = 0;
      used[lead + i].second = std::max<int64_t>(pads[lead + i].second - w.padding[i], 0);
    }
  }
  Shape scalar{c, {}};
  return b.op_with_region(
      "stablehlo.reduce_window", {counted, constant(b, c, 0)}, {Shape{c, out}}, {scalar, scalar},
      [scalar](FunctionBuilder& r, const std::vector<Value>& args) {
        return std::vector<Value>{r.op("stablehlo.add", {args[0], args[1]}, scalar)};
      },
      window_attrs(w, lead, used))[0];
}

// avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
Values avg_pool(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  size_t n = a.ints("kernel_size").size() == 1 ? 2 : a.ints("kernel_size").size();
  size_t lead = x.shape.rank() - n;
  Window w = window(a, n);
  Dims out = out_shape(a);
  Shape scalar{c, {}};
  Value sum = b.op_with_region(
      "stablehlo.reduce_window", {x, constant(b, c, 0)}, {Shape{c, out}}, {scalar, scalar},
      [scalar](FunctionBuilder& r, const std::vector<Value>& args) {
        return std::vector<Value>{r.op("stablehlo.add", {args[0], args[1]}, scalar)};
      },
      window_attrs(w, lead, paddings(x.shape.dims, out, w, lead)))[0];
  Value divisor = a.has("divisor_override")
                      ? full(b, c, out, static_cast<double>(a.i("divisor_override")))
                      : window_counts(b, x.shape.dims, out, w, lead, c,
                                      a.i("count_include_pad") != 0);
  return {convert(b, binary(b, "stablehlo.divide", sum, divisor), t)};
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override): each window's gradient spread over its elements.
Values avg_pool_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = convert(b, v[0], c);
  Dims in = out_shape(a);
  size_t n = a.ints("kernel_size").size() == 1 ? 2 : a.ints("kernel_size").size();
  size_t lead = in.size() - n;
  Window w = window(a, n);
  Dims out = g.shape.dims;
  Value divisor = a.has("divisor_override")
                      ? full(b, c, out, static_cast<double>(a.i("divisor_override")))
                      : window_counts(b, in, out, w, lead, c, a.i("count_include_pad") != 0);
  Value share = binary(b, "stablehlo.divide", g, divisor);
  // The transpose of a windowed sum: scatter-add each window's share over its elements, written
  // as a sum over kernel offsets of strided pads.
  auto pads = paddings(in, out, w, lead);
  Dims padded = in;
  for (size_t i = 0; i < n; ++i) padded[lead + i] += pads[lead + i].first + pads[lead + i].second;
  Value acc = full(b, c, padded, 0);
  size_t offsets = 1;
  for (int64_t k : w.kernel) offsets *= static_cast<size_t>(k);
  for (size_t o = 0; o < offsets; ++o) {
    Dims low(in.size(), 0), high(in.size(), 0), interior(in.size(), 0);
    size_t rest = o;
    for (size_t i = n; i-- > 0;) {
      int64_t k = static_cast<int64_t>(rest % w.kernel[i]);
      rest /= w.kernel[i];
      int64_t start = k * w.dilation[i];
      int64_t span = (out[lead + i] - 1) * w.stride[i] + 1;
      low[lead + i] = start;
      high[lead + i] = padded[lead + i] - start - span;
      interior[lead + i] = w.stride[i] - 1;
    }
    Value placed = b.op("stablehlo.pad", {share, constant(b, c, 0)}, Shape{c, padded},
                        "edge_padding_low = " + FunctionBuilder::i64_array(low) +
                            ", edge_padding_high = " + FunctionBuilder::i64_array(high) +
                            ", interior_padding = " + FunctionBuilder::i64_array(interior));
    acc = binary(b, "stablehlo.add", acc, placed);
  }
  Dims start(in.size(), 0), limit = padded;
  for (size_t i = 0; i < n; ++i) {
    start[lead + i] = pads[lead + i].first;
    limit[lead + i] = start[lead + i] + in[lead + i];
  }
  return {convert(b, slice(b, acc, start, limit), t)};
}

}  // namespace

void register_pooling_rules(Registry& r) {
  r.add("max_pool", max_pool, {"max_pool2d_with_indices", "max_pool2d_with_indices.out"});
  r.add("max_pool_backward", max_pool_backward,
        {"max_pool2d_with_indices_backward", "max_pool2d_with_indices_backward.grad_input"});
  r.add("avg_pool", avg_pool, {"avg_pool2d", "avg_pool2d.out"});
  r.add("avg_pool_backward", avg_pool_backward,
        {"avg_pool2d_backward", "avg_pool2d_backward.grad_input"});
}

}  // namespace torchtpu::lowering
