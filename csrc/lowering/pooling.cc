// Pooling on stablehlo.reduce_window over the trailing spatial dims, and its gradients.
#include <algorithm>
#include <functional>
#include <limits>

#include "lowering/helpers.h"
#include "lowering/registry.h"
#include "lowering/resample.h"

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
  // An empty stride means the kernel's.
  bool strided = a.has("stride") && !a.ints("stride").empty();
  w.stride = strided ? expand_to(a.ints("stride"), n, 1) : w.kernel;
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
  return "window_dimensions = " + FunctionBuilder::i64_array(dims) +
         ", window_strides = " + FunctionBuilder::i64_array(strides) +
         ", window_dilations = " + FunctionBuilder::i64_array(dil) +
         ", padding = " + FunctionBuilder::padding(pads);
}

// Flat position of each element within its spatial plane (the dims from `lead` on).
Value plane_index(FunctionBuilder& b, const Dims& dims, size_t lead) {
  Value index = full(b, ElementType::kS64, dims, 0);
  int64_t scale = 1;
  for (size_t d = dims.size(); d-- > lead;) {
    Value step = binary(b, "stablehlo.multiply", iota(b, ElementType::kS64, dims, d),
                        full(b, ElementType::kS64, dims, static_cast<double>(scale)));
    index = binary(b, "stablehlo.add", index, step);
    scale *= dims[d];
  }
  return index;
}

// Scatters `values` [planes.., *] to the flat positions `indices` (same shape) of planes of
// shape `dims` (the last `n` dims are a plane), adding up or replacing.
Value to_planes(FunctionBuilder& b, const Value& values, const Value& indices, const Dims& dims,
                size_t n, bool add) {
  ElementType c = values.shape.type;
  if (values.shape.numel() == 0) return full(b, c, dims, 0);
  size_t lead = dims.size() - n;
  int64_t planes = 1, plane = 1, windows = 1;
  for (size_t d = 0; d < lead; ++d) planes *= dims[d];
  for (size_t d = lead; d < dims.size(); ++d) plane *= dims[d];
  windows = values.shape.numel() / std::max<int64_t>(planes, 1);
  Value flat_v = reshape(b, values, {planes, windows});
  Value flat_i = reshape(b, convert(b, indices, ElementType::kS64), {planes, windows, 1});
  Value plane_id = iota(b, ElementType::kS64, {planes, windows, 1}, 0);
  Value coords = concatenate(b, {plane_id, flat_i}, 2);
  Value r = scatter(b, full(b, c, {planes, plane}, 0), coords, flat_v, add,
                    "scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = "
                    "[0, 1], scatter_dims_to_operand_dims = [0, 1], index_vector_dim = 2>");
  return reshape(b, r, dims);
}

// unfold_backward(grad_in [.., windows at dim, .., size], input_sizes, dim, size, step): each
// window's element k added back at k + window * step.
Values unfold_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = convert(b, v[0], c);
  Dims in = out_shape(a);
  if (in.empty()) return {convert(b, reshape(b, g, {}), t)};
  int64_t dim = normalize_dim(a.i("dim"), static_cast<int64_t>(in.size()));
  int64_t size = a.i("size"), step = a.i("step");
  if (g.shape.numel() == 0 || size == 0) return {full(b, t, in, 0)};
  Dims block = g.shape.dims;
  block.pop_back();
  int64_t windows = block[dim];
  Value acc;
  for (int64_t k = 0; k < size; ++k) {
    Dims start(g.shape.rank(), 0), limit = g.shape.dims;
    start.back() = k;
    limit.back() = k + 1;
    Value part = reshape(b, slice(b, g, start, limit), block);
    Dims low(in.size(), 0), high(in.size(), 0), interior(in.size(), 0);
    low[dim] = k;
    high[dim] = in[dim] - k - (windows - 1) * step - 1;
    interior[dim] = step - 1;
    Value placed = b.op("stablehlo.pad", {part, constant(b, c, 0)}, Shape{c, in},
                        "edge_padding_low = " + FunctionBuilder::i64_array(low) +
                            ", edge_padding_high = " + FunctionBuilder::i64_array(high) +
                            ", interior_padding = " + FunctionBuilder::i64_array(interior));
    acc = k == 0 ? placed : binary(b, "stablehlo.add", acc, placed);
  }
  return {convert(b, acc, t)};
}

// max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
//   -> (values, indices into each flattened spatial plane)
Values max_pool(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  Value x = v[0];
  size_t rank = x.shape.rank(), lead = rank - n;
  Window w = window(a, n);
  Dims out = out_shape(a);
  auto pads = paddings(x.shape.dims, out, w, lead);
  Dims plane(x.shape.dims.begin() + lead, x.shape.dims.end());
  Value index = plane_index(b, x.shape.dims, lead);
  ElementType t = x.shape.type;
  Shape vs{t, {}}, is{ElementType::kS64, {}};
  auto r = b.op_with_region(
      "stablehlo.reduce_window",
      {x, index, extreme(b, t, false), constant(b, ElementType::kS64, -1)},
      {Shape{t, out}, Shape{ElementType::kS64, out}}, {vs, is, vs, is},
      [t](FunctionBuilder& r, const std::vector<Value>& args) {
        const Value &v1 = args[0], &i1 = args[1], &v2 = args[2], &i2 = args[3];
        Value take1 = compare(r, v1, v2, "GT");
        Value tie = b_and(r, compare(r, v1, v2, "EQ"), compare(r, i1, i2, "LT"));
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
Values max_pool_backward(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  ElementType t = out_type(a);
  return {convert(b, to_planes(b, convert(b, v[0], opmath(t)), v[2], out_shape(a), n, true), t)};
}

// max_unpool2d(self, indices, output_size) / max_unpool3d(self, indices, output_size, stride,
// padding): each value written where its index points (out-of-range indices raise through the
// device-side check).
Values max_unpool(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  return {convert(b, to_planes(b, v[0], v[1], out_shape(a), n, false), out_type(a))};
}

size_t kernel_offsets(const Window& w) {
  size_t offsets = 1;
  for (int64_t k : w.kernel) offsets *= static_cast<size_t>(k);
  return offsets;
}

// The position of kernel offset `o` (row-major over the kernel) along each spatial dim.
Dims kernel_offset(const Window& w, size_t o) {
  Dims k(w.kernel.size());
  for (size_t i = w.kernel.size(); i-- > 0;) {
    k[i] = static_cast<int64_t>(o % w.kernel[i]) * w.dilation[i];
    o /= w.kernel[i];
  }
  return k;
}

// The element at kernel offset `o` of every window of `x` [.., in spatial], whose windows give
// `out` positions: a strided slice of the padded input.
Value window_elements(FunctionBuilder& b, const Value& x, size_t o, const Dims& out,
                      const Window& w, size_t lead) {
  auto pads = paddings(x.shape.dims, out, w, lead);
  Dims low(x.shape.rank(), 0), high(x.shape.rank(), 0), padded = x.shape.dims;
  for (size_t d = lead; d < padded.size(); ++d) {
    low[d] = pads[d].first;
    high[d] = pads[d].second;
    padded[d] += low[d] + high[d];
  }
  ElementType t = x.shape.type;
  Value p = b.op("stablehlo.pad", {x, constant(b, t, 0)}, Shape{t, padded},
                 "edge_padding_low = " + FunctionBuilder::i64_array(low) +
                     ", edge_padding_high = " + FunctionBuilder::i64_array(high) +
                     ", interior_padding = " + FunctionBuilder::i64_array(Dims(padded.size(), 0)));
  Dims k = kernel_offset(w, o), start(padded.size(), 0), limit = padded, strides(padded.size(), 1);
  for (size_t i = 0; i < k.size(); ++i) {
    start[lead + i] = k[i];
    limit[lead + i] = k[i] + (out[lead + i] - 1) * w.stride[i] + 1;
    strides[lead + i] = w.stride[i];
  }
  Dims shape = out;
  for (size_t d = 0; d < lead; ++d) shape[d] = padded[d];
  return b.op("stablehlo.slice", {p}, Shape{t, shape},
              "start_indices = " + FunctionBuilder::i64_array(start) +
                  ", limit_indices = " + FunctionBuilder::i64_array(limit) +
                  ", strides = " + FunctionBuilder::i64_array(strides));
}

// The transpose of `window_elements` summed over the kernel: block(o) [.., out spatial] holds
// what each window gives its element at kernel offset o; the result has the input's shape.
Value scatter_windows(FunctionBuilder& b, const std::function<Value(size_t)>& block, const Dims& in,
                      const Dims& out, const Window& w, size_t lead) {
  size_t n = w.kernel.size();
  auto pads = paddings(in, out, w, lead);
  Dims padded = in;
  for (size_t i = 0; i < n; ++i) padded[lead + i] += pads[lead + i].first + pads[lead + i].second;
  Value acc;
  for (size_t o = 0; o < kernel_offsets(w); ++o) {
    Value share = block(o);
    ElementType c = share.shape.type;
    Dims k = kernel_offset(w, o);
    Dims low(in.size(), 0), high(in.size(), 0), interior(in.size(), 0);
    for (size_t i = 0; i < n; ++i) {
      int64_t span = (out[lead + i] - 1) * w.stride[i] + 1;
      low[lead + i] = k[i];
      high[lead + i] = padded[lead + i] - k[i] - span;
      interior[lead + i] = w.stride[i] - 1;
    }
    Value placed = b.op("stablehlo.pad", {share, constant(b, c, 0)}, Shape{c, padded},
                        "edge_padding_low = " + FunctionBuilder::i64_array(low) +
                            ", edge_padding_high = " + FunctionBuilder::i64_array(high) +
                            ", interior_padding = " + FunctionBuilder::i64_array(interior));
    acc = o == 0 ? placed : binary(b, "stablehlo.add", acc, placed);
  }
  Dims start(in.size(), 0), limit = padded;
  for (size_t i = 0; i < n; ++i) {
    start[lead + i] = pads[lead + i].first;
    limit[lead + i] = start[lead + i] + in[lead + i];
  }
  return slice(b, acc, start, limit);
}

// The output positions of `w`'s windows over spatial dims `spatial`.
Dims window_positions(const Dims& spatial, const Window& w) {
  Dims out;
  for (size_t i = 0; i < spatial.size(); ++i) {
    int64_t span = w.dilation[i] * (w.kernel[i] - 1) + 1;
    out.push_back((spatial[i] + 2 * w.padding[i] - span) / w.stride[i] + 1);
  }
  return out;
}

// im2col(self [N?, C, H, W], kernel_size, dilation, padding, stride) -> [N?, C*kh*kw, L]
Values im2col(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  size_t lead = x.shape.rank() - 2;
  Window w = window(a, 2);
  Dims out = x.shape.dims, positions = window_positions(Dims(out.begin() + lead, out.end()), w);
  out[lead] = positions[0];
  out[lead + 1] = positions[1];
  Dims result = out_shape(a);
  if (x.shape.numel() == 0 || positions[0] <= 0 || positions[1] <= 0) {
    return {full(b, out_type(a), result, 0)};
  }
  Dims column(x.shape.dims.begin(), x.shape.dims.begin() + lead);  // [N?, C, 1, L]
  column.push_back(1);
  column.push_back(positions[0] * positions[1]);
  std::vector<Value> parts;
  for (size_t o = 0; o < kernel_offsets(w); ++o) {
    parts.push_back(reshape(b, window_elements(b, x, o, out, w, lead), column));
  }
  return {convert(b, reshape(b, concatenate(b, parts, static_cast<int64_t>(lead)), result),
                  out_type(a))};
}

// col2im(self [N?, C*kh*kw, L], output_size, kernel_size, dilation, padding, stride)
//   -> [N?, C, H, W]: each column element added back to the position im2col read it from.
Values col2im(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value cols = convert(b, v[0], c);
  Dims in = out_shape(a);
  size_t lead = in.size() - 2;
  Window w = window(a, 2);
  Dims positions = window_positions(Dims(in.begin() + lead, in.end()), w);
  if (cols.shape.numel() == 0) return {full(b, t, in, 0)};
  Dims out = in;
  out[lead] = positions[0];
  out[lead + 1] = positions[1];
  int64_t offsets = static_cast<int64_t>(kernel_offsets(w));
  Dims split(in.begin(), in.begin() + lead);  // [N?, C, K, oh, ow]
  split.push_back(offsets);
  split.push_back(positions[0]);
  split.push_back(positions[1]);
  Value blocks = reshape(b, cols, split);
  auto block = [&](size_t o) {
    Dims start(split.size(), 0), limit = split;
    start[lead] = static_cast<int64_t>(o);
    limit[lead] = static_cast<int64_t>(o) + 1;
    return reshape(b, slice(b, blocks, start, limit), out);
  };
  return {convert(b, scatter_windows(b, block, in, out, w, lead), t)};
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
Values avg_pool(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
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
  Value divisor =
      a.has("divisor_override")
          ? full(b, c, out, static_cast<double>(a.i("divisor_override")))
          : window_counts(b, x.shape.dims, out, w, lead, c, a.i("count_include_pad") != 0);
  return {convert(b, binary(b, "stablehlo.divide", sum, divisor), t)};
}

// avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override): each window's gradient spread over its elements.
Values avg_pool_backward(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = convert(b, v[0], c);
  Dims in = out_shape(a);
  size_t lead = in.size() - n;
  Window w = window(a, n);
  Dims out = g.shape.dims;
  Value divisor = a.has("divisor_override")
                      ? full(b, c, out, static_cast<double>(a.i("divisor_override")))
                      : window_counts(b, in, out, w, lead, c, a.i("count_include_pad") != 0);
  Value share = binary(b, "stablehlo.divide", g, divisor);
  return {convert(b, scatter_windows(b, [&](size_t) { return share; }, in, out, w, lead), t)};
}

// The windows of adaptive pooling along one dimension: [floor(o*in/out), ceil((o+1)*in/out)).
Taps adaptive_taps(int64_t in, int64_t out) {
  auto start = [&](int64_t o) { return o * in / out; };
  auto end = [&](int64_t o) { return ((o + 1) * in + out - 1) / out; };
  int64_t width = 1;
  for (int64_t o = 0; o < out; ++o) width = std::max(width, end(o) - start(o));
  Taps taps(in, out, width);
  taps.unit = true;
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < end(o) - start(o); ++k) taps.set(o, k, start(o) + k, 1);
  }
  return taps;
}

// Each output element's window size, the product of its per-dimension window lengths.
Value adaptive_counts(FunctionBuilder& b, ElementType c, const Dims& out, size_t lead,
                      const Dims& in) {
  Value counts = full(b, c, out, 1);
  for (size_t d = lead; d < out.size(); ++d) {
    Taps taps = adaptive_taps(in[d], out[d]);
    std::vector<double> length;
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t n = 0;
      for (int64_t k = 0; k < taps.width; ++k) n += taps.index[o * taps.width + k] >= 0;
      length.push_back(static_cast<double>(n));
    }
    counts =
        binary(b, "stablehlo.multiply", counts,
               broadcast_in_dim(b, constant_vector(b, c, length), out, {static_cast<int64_t>(d)}));
  }
  return counts;
}

// _adaptive_avg_pool2d/3d(self, output_size): window sums, one dimension at a time, over the
// window size.
Values adaptive_avg_pool(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c);
  Dims in = x.shape.dims, out = out_shape(a);
  size_t lead = out.size() - n;
  for (size_t d = out.size(); d-- > lead;) {
    x = resample(b, x, static_cast<int64_t>(d), adaptive_taps(in[d], out[d]));
  }
  if (x.shape.numel() == 0) return {full(b, t, out, 0)};
  return {convert(b, binary(b, "stablehlo.divide", x, adaptive_counts(b, c, out, lead, in)), t)};
}

// _adaptive_avg_pool2d/3d_backward(grad_output, self)
Values adaptive_avg_pool_backward(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  ElementType t = out_type(a), c = opmath(t);
  Value g = convert(b, v[0], c);
  Dims in = out_shape(a), out = g.shape.dims;
  size_t lead = in.size() - n;
  if (g.shape.numel() == 0) return {full(b, t, in, 0)};
  g = binary(b, "stablehlo.divide", g, adaptive_counts(b, c, out, lead, in));
  for (size_t d = lead; d < in.size(); ++d) {
    g = resample_transpose(b, g, static_cast<int64_t>(d), adaptive_taps(in[d], out[d]));
  }
  return {convert(b, g, t)};
}

// Whether (v1, i1) wins over (v2, i2) in PyTorch's scan of a window in index order, which
// takes a strictly greater value or any NaN: the last NaN, else the first maximum.
Value wins(FunctionBuilder& b, const Value& v1, const Value& i1, const Value& v2, const Value& i2) {
  Value greater = compare(b, v1, v2, "GT");
  Value first = b_and(b, compare(b, v1, v2, "EQ"), compare(b, i1, i2, "LT"));
  Value take = b_or(b, greater, first);
  if (!hlo::is_floating(v1.shape.type)) return take;
  Value nan1 = compare(b, v1, v1, "NE"), nan2 = compare(b, v2, v2, "NE");
  Value later = compare(b, i1, i2, "GT");
  return select(b, nan1, b_or(b, unary(b, "stablehlo.not", nan2), later),
                b_and(b, unary(b, "stablehlo.not", nan2), take));
}

// adaptive_max_pool2d/3d(self, output_size) -> (values, indices into each flattened plane): the
// winner of each window, one dimension at a time (the order of the scan is a total order).
Values adaptive_max_pool(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  Value x = v[0];
  Dims in = x.shape.dims, out = out_shape(a);
  size_t lead = out.size() - n;
  if (x.shape.numel() == 0) {
    return {full(b, out_type(a), out, 0), full(b, out_type(a, 1), out, 0)};
  }
  Value index = plane_index(b, in, lead);
  for (size_t d = out.size(); d-- > lead;) {
    int64_t dim = static_cast<int64_t>(d);
    Taps taps = adaptive_taps(in[d], out[d]);
    Value best, best_index;
    for (int64_t k = 0; k < taps.width; ++k) {
      std::vector<int64_t> at;
      std::vector<double> valid;
      for (int64_t o = 0; o < out[d]; ++o) {
        int64_t i = taps.index[o * taps.width + k];
        at.push_back(std::max<int64_t>(i, 0));
        valid.push_back(i >= 0);
      }
      Value val = take(b, x, dim, at), idx = take(b, index, dim, at);
      if (k == 0) {
        best = val;
        best_index = idx;
        continue;
      }
      Value present =
          broadcast_in_dim(b, constant_vector(b, ElementType::kPred, valid), val.shape.dims, {dim});
      Value pick = b_and(b, present, wins(b, val, idx, best, best_index));
      best = select(b, pick, val, best);
      best_index = select(b, pick, idx, best_index);
    }
    x = best;
    index = best_index;
  }
  return {convert(b, x, out_type(a)), convert(b, index, out_type(a, 1))};
}


// fractional_max_pool2d/3d(self, kernel_size, output_size, random_samples) -> (values, indices
// into each flattened plane). Along each spatial dimension d, window o starts at
// trunc((o + u) * alpha) - trunc(u * alpha) with alpha = (in - k) / (out - 1), computed in the
// samples' type as PyTorch does, and the last window at in - k; u is the plane's sample for d
// (random_samples[n, c, j]: j = 0 the width and 1 the height in 2d, j = 0, 1, 2 time, height,
// width in 3d). Each window's winner as in PyTorch's scan: the last NaN, else the first maximum.
Values fractional_max_pool(FunctionBuilder& b, const Values& v, const Attrs& a, size_t n) {
  Value x = v[0], samples = v[1];
  ElementType t = x.shape.type, st = samples.shape.type;
  const Dims& in = x.shape.dims;
  Dims out = out_shape(a);
  size_t lead = in.size() - n;
  if (!hlo::is_floating(t)) {
    throw Refused(std::string("\"fractional_max_pool") + std::to_string(n) +
                  "d_out_frame\" not implemented for '" + scalar_type_name(t) + "'");
  }
  int64_t count_out = Shape{t, out}.numel();
  if (count_out == 0) return {full(b, t, out, 0), full(b, out_type(a, 1), out, 0)};
  const std::vector<int64_t>& kernel = a.ints("kernel_size");
  Dims planes(in.begin(), in.begin() + lead);  // (N, C) or (C)
  // Each plane's samples, (planes..., n): the first N of 4d/5d input's, the first of 3d/4d's.
  int64_t batch = lead == 2 ? in[0] : 1;
  Value u = slice(b, samples, {0, 0, 0}, {batch, samples.shape.dims[1], samples.shape.dims[2]});
  Dims with_n = planes;
  with_n.push_back(static_cast<int64_t>(n));
  u = reshape(b, u, with_n);
  // The flat position in x of each window's first element, (planes..., out spatial...).
  Value start = full(b, ElementType::kS64, out, 0);
  int64_t stride = 1;
  for (size_t d = in.size(); d-- > lead;) {
    size_t j = d - lead;  // spatial dimension j; its sample's index in random_samples
    int64_t k = kernel[j], size = in[d], count = out[d];
    int64_t which = n == 2 ? 1 - static_cast<int64_t>(j) : static_cast<int64_t>(j);
    Dims at(planes.size(), 0), to = planes;
    at.push_back(which);
    to.push_back(which + 1);
    Dims plane_axes;
    for (size_t e = 0; e < planes.size(); ++e) plane_axes.push_back(static_cast<int64_t>(e));
    Value ud = broadcast_in_dim(b, reshape(b, slice(b, u, at, to), planes), out, plane_axes);
    Value o = convert(b, iota(b, ElementType::kS64, out, static_cast<int64_t>(d)), st);
    Value first;
    if (count > 1) {
      Value alpha = binary(b, "stablehlo.divide", full(b, st, out, static_cast<double>(size - k)),
                           full(b, st, out, static_cast<double>(count - 1)));
      Value scaled = binary(b, "stablehlo.multiply", binary(b, "stablehlo.add", o, ud), alpha);
      Value shift = binary(b, "stablehlo.multiply", ud, alpha);
      first = binary(b, "stablehlo.subtract", convert(b, scaled, ElementType::kS64),
                     convert(b, shift, ElementType::kS64));
      Value last = compare(b, o, full(b, st, out, static_cast<double>(count - 1)), "EQ");
      first = select(b, last, full(b, ElementType::kS64, out, static_cast<double>(size - k)),
                     first);
    } else {
      first = full(b, ElementType::kS64, out, static_cast<double>(size - k));
    }
    start = binary(b, "stablehlo.add", start,
                   binary(b, "stablehlo.multiply", first,
                          full(b, ElementType::kS64, out, static_cast<double>(stride))));
    stride *= size;
  }
  // The flat position of each plane's first element in x.
  Value plane_offset = full(b, ElementType::kS64, out, 0);
  for (size_t d = lead, scale = static_cast<size_t>(stride); d-- > 0; scale *= in[d]) {
    plane_offset = binary(b, "stablehlo.add", plane_offset,
                          binary(b, "stablehlo.multiply",
                                 iota(b, ElementType::kS64, out, static_cast<int64_t>(d)),
                                 full(b, ElementType::kS64, out, static_cast<double>(scale))));
  }
  // Every offset in the window, in PyTorch's scan order (the last spatial dimension fastest).
  std::vector<int64_t> offsets;
  std::function<void(size_t, int64_t)> walk = [&](size_t j, int64_t offset) {
    if (j == n) {
      offsets.push_back(offset);
      return;
    }
    int64_t plane_stride = 1;
    for (size_t e = lead + j + 1; e < in.size(); ++e) plane_stride *= in[e];
    for (int64_t i = 0; i < kernel[j]; ++i) walk(j + 1, offset + i * plane_stride);
  };
  walk(0, 0);
  if (offsets.empty()) {  // an empty window: -inf at the window's start, as PyTorch gives
    return {full(b, t, out, -std::numeric_limits<double>::infinity()),
            convert(b, start, out_type(a, 1))};
  }
  Value best, best_index;
  for (size_t i = 0; i < offsets.size(); ++i) {
    Value index = binary(b, "stablehlo.add", start,
                         full(b, ElementType::kS64, out, static_cast<double>(offsets[i])));
    Value at = reshape(b, binary(b, "stablehlo.add", index, plane_offset), {count_out});
    Value value = reshape(b, gather_rows(b, reshape(b, x, {x.shape.numel(), 1}), at), out);
    if (i == 0) {
      best = value;
      best_index = index;
      continue;
    }
    Value pick = wins(b, value, index, best, best_index);
    best = select(b, pick, value, best);
    best_index = select(b, pick, index, best_index);
  }
  return {best, convert(b, best_index, out_type(a, 1))};
}

}  // namespace

// A rule for `n` spatial dims.
LoweringRule spatial(Values (*rule)(FunctionBuilder&, const Values&, const Attrs&, size_t),
                     size_t n) {
  return
      [rule, n](FunctionBuilder& b, const Values& v, const Attrs& a) { return rule(b, v, a, n); };
}

void register_pooling_rules(Registry& r) {
  r.add("im2col", im2col, {"im2col", "im2col.out"});
  r.add("col2im", col2im, {"col2im", "col2im.out"});
  r.add("unfold_backward", unfold_backward, {"unfold_backward"});
  for (size_t n : {2, 3}) {
    std::string d = std::to_string(n) + "d";
    r.add("max_pool" + d, spatial(max_pool, n),
          {"max_pool" + d + "_with_indices", "max_pool" + d + "_with_indices.out"});
    r.add("max_pool" + d + "_backward", spatial(max_pool_backward, n),
          {"max_pool" + d + "_with_indices_backward",
           "max_pool" + d + "_with_indices_backward.grad_input"});
    r.add("avg_pool" + d, spatial(avg_pool, n), {"avg_pool" + d, "avg_pool" + d + ".out"});
    r.add("avg_pool" + d + "_backward", spatial(avg_pool_backward, n),
          {"avg_pool" + d + "_backward", "avg_pool" + d + "_backward.grad_input"});
    r.add("adaptive_avg_pool" + d, spatial(adaptive_avg_pool, n),
          {"_adaptive_avg_pool" + d, "_adaptive_avg_pool" + d + ".out",
           "adaptive_avg_pool" + d + ".out"});
    r.add("adaptive_avg_pool" + d + "_backward", spatial(adaptive_avg_pool_backward, n),
          {"_adaptive_avg_pool" + d + "_backward", "_adaptive_avg_pool" + d + "_backward.out",
           "adaptive_avg_pool" + d + "_backward.grad_input"});
    r.add("adaptive_max_pool" + d, spatial(adaptive_max_pool, n),
          {"adaptive_max_pool" + d, "adaptive_max_pool" + d + ".out"});
    r.add("max_unpool" + d, spatial(max_unpool, n), {"max_unpool" + d, "max_unpool" + d + ".out"});
    r.add(
        "adaptive_max_pool" + d + "_backward", spatial(max_pool_backward, n),
        {"adaptive_max_pool" + d + "_backward", "adaptive_max_pool" + d + "_backward.grad_input"});
    r.add("fractional_max_pool" + d, spatial(fractional_max_pool, n),
          {"fractional_max_pool" + d, "fractional_max_pool" + d + ".output"});
    r.add("fractional_max_pool" + d + "_backward", spatial(max_pool_backward, n),
          {"fractional_max_pool" + d + "_backward",
           "fractional_max_pool" + d + "_backward.grad_input"});
  }
}

}  // namespace torchtpu::lowering
