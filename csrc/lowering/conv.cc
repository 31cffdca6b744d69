// Convolutions (N-d, strided, padded, dilated, grouped, transposed) and their gradients on
// stablehlo.convolution. Layouts are PyTorch's: input [N, C, *], weight [O, C/groups, *].
#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

struct ConvParams {
  Dims stride, padding, dilation, output_padding;
  bool transposed;
  int64_t groups;
};

ConvParams params(const Attrs& a) {
  return {a.ints("stride"), a.ints("padding"), a.ints("dilation"), a.ints("output_padding"),
          a.i("transposed") != 0, a.i("groups")};
}

// "[b, f, 0, 1]"-style layout for `spatial` dims with the two leading roles given.
std::string layout(const std::string& first, const std::string& second, size_t spatial) {
  std::string s = "[" + first + ", " + second;
  for (size_t i = 0; i < spatial; ++i) s += ", " + std::to_string(i);
  return s + "]";
}

Value conv(FunctionBuilder& b, const Value& lhs, const Value& rhs, const Dims& out,
           const Dims& strides, const std::vector<std::pair<int64_t, int64_t>>& pads,
           const Dims& lhs_dilation, const Dims& rhs_dilation, int64_t feature_groups,
           int64_t batch_groups, const std::string& lhs_layout, const std::string& rhs_layout,
           const std::string& out_layout) {
  return b.op("stablehlo.convolution", {lhs, rhs}, Shape{lhs.shape.type, out},
              "window_strides = " + FunctionBuilder::i64_array(strides) + ", padding = " +
                  FunctionBuilder::padding(pads) + ", lhs_dilation = " + FunctionBuilder::i64_array(lhs_dilation) +
                  ", rhs_dilation = " + FunctionBuilder::i64_array(rhs_dilation) +
                  ", dimension_numbers = #stablehlo.conv<" + lhs_layout + "x" + rhs_layout + "->" +
                  out_layout + ">, feature_group_count = " + std::to_string(feature_groups) +
                  " : i64, batch_group_count = " + std::to_string(batch_groups) + " : i64");
}

Dims spatial_of(const Value& v) { return Dims(v.shape.dims.begin() + 2, v.shape.dims.end()); }

// The weight of a convolution that runs `w` backwards: spatially flipped, with the in/out
// channel roles swapped within each group. [O, I/g, *] -> [I, O/g, *].
Value transpose_kernel(FunctionBuilder& b, const Value& w, int64_t groups) {
  Dims d = w.shape.dims;
  size_t spatial = d.size() - 2;
  Dims flip;
  for (size_t i = 0; i < spatial; ++i) flip.push_back(static_cast<int64_t>(i + 2));
  Value f = spatial ? b.op("stablehlo.reverse", {w}, w.shape,
                           "dimensions = " + FunctionBuilder::i64_array(flip))
                    : w;
  int64_t o = d[0], i = d[1];
  Dims grouped{groups, o / groups, i};
  grouped.insert(grouped.end(), d.begin() + 2, d.end());
  f = reshape(b, f, grouped);
  Dims perm{0, 2, 1};
  for (size_t k = 0; k < spatial; ++k) perm.push_back(static_cast<int64_t>(k + 3));
  f = transpose(b, f, perm);
  Dims out{groups * i, o / groups};
  out.insert(out.end(), d.begin() + 2, d.end());
  return reshape(b, f, out);
}

// input x, weight w: the forward convolution (transposed when p.transposed).
Value forward(FunctionBuilder& b, const Value& x, const Value& w, const ConvParams& p,
              const Dims& out) {
  size_t n = x.shape.rank() - 2;
  std::string io = layout("b", "f", n), oi = layout("o", "i", n);
  Dims ones(n, 1);
  if (!p.transposed) {
    std::vector<std::pair<int64_t, int64_t>> pads;
    for (size_t i = 0; i < n; ++i) pads.push_back({p.padding[i], p.padding[i]});
    return conv(b, x, w, out, p.stride, pads, ones, p.dilation, p.groups, 1, io, oi, io);
  }
  // A transposed convolution is the gradient of a convolution with respect to its input.
  Value k = transpose_kernel(b, w, p.groups);  // weight [I, O/g, *] -> [O, I/g, *]
  std::vector<std::pair<int64_t, int64_t>> pads;
  Dims ks = spatial_of(w);
  for (size_t i = 0; i < n; ++i) {
    int64_t edge = p.dilation[i] * (ks[i] - 1) - p.padding[i];
    pads.push_back({edge, edge + p.output_padding[i]});
  }
  return conv(b, x, k, out, ones, pads, p.stride, p.dilation, p.groups, 1, io, oi, io);
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
Values convolution(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Value x = convert(b, v[0], c), w = convert(b, v[1], c);
  ConvParams p = params(a);
  Dims out = out_shape(a);
  Value y = forward(b, x, w, p, out);
  if (!a.has("bias_absent")) {
    y = binary(b, "stablehlo.add", y, broadcast_in_dim(b, convert(b, v[2], c), out, {1}));
  }
  return {convert(b, y, t)};
}

// The gradient of a (non-transposed) convolution with respect to its input.
Value grad_input(FunctionBuilder& b, const Value& g, const Value& w, const ConvParams& p,
                 const Dims& in) {
  size_t n = g.shape.rank() - 2;
  Value k = transpose_kernel(b, w, p.groups);
  Dims ks = spatial_of(w), os = spatial_of(g);
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (size_t i = 0; i < n; ++i) {
    int64_t span = p.dilation[i] * (ks[i] - 1) + 1;
    int64_t dilated = (os[i] - 1) * p.stride[i] + 1;
    int64_t lo = span - 1 - p.padding[i];
    pads.push_back({lo, in[i + 2] + span - 1 - dilated - lo});
  }
  std::string io = layout("b", "f", n), oi = layout("o", "i", n);
  return conv(b, g, k, in, Dims(n, 1), pads, p.stride, p.dilation, p.groups, 1, io, oi, io);
}

// The gradient of a (non-transposed) convolution with respect to its weight, one group at a time.
Value grad_weight(FunctionBuilder& b, const Value& x, const Value& g, const ConvParams& p,
                  const Dims& wshape) {
  size_t n = x.shape.rank() - 2;
  int64_t cin = x.shape.dims[1] / p.groups, cout = g.shape.dims[1] / p.groups;
  Dims ks(wshape.begin() + 2, wshape.end()), is = spatial_of(x), os = spatial_of(g);
  std::vector<std::pair<int64_t, int64_t>> pads;
  for (size_t i = 0; i < n; ++i) {
    int64_t lo = p.padding[i];
    int64_t hi = (ks[i] - 1) * p.dilation[i] + (os[i] - 1) * p.stride[i] + 1 - is[i] - lo;
    pads.push_back({lo, hi});
  }
  std::vector<Value> parts;
  for (int64_t grp = 0; grp < p.groups; ++grp) {
    Dims start(x.shape.rank(), 0), limit = x.shape.dims;
    start[1] = grp * cin;
    limit[1] = (grp + 1) * cin;
    Value xg = slice(b, x, start, limit);
    Dims gs(g.shape.rank(), 0), gl = g.shape.dims;
    gs[1] = grp * cout;
    gl[1] = (grp + 1) * cout;
    Value gg = slice(b, g, gs, gl);
    // Batch is the contraction: input as [f=N, b=C], grad as kernel [i=N, o=O].
    Dims out{cin, cout};
    out.insert(out.end(), ks.begin(), ks.end());
    Value r = conv(b, xg, gg, out, p.dilation, pads, Dims(n, 1), p.stride, 1, 1,
                   layout("f", "b", n), layout("i", "o", n), layout("b", "f", n));
    Dims perm{1, 0};
    for (size_t k = 0; k < n; ++k) perm.push_back(static_cast<int64_t>(k + 2));
    parts.push_back(transpose(b, r, perm));
  }
  return concatenate(b, parts, 0);
}

// convolution_backward(grad_output, input, weight, stride, padding, dilation, transposed,
// output_padding, groups, output_mask) -> (grad_input, grad_weight, grad_bias)
Values convolution_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = a.has("type") ? out_type(a) : v[1].shape.type, c = opmath(t);
  Value g = convert(b, v[0], c), x = convert(b, v[1], c), w = convert(b, v[2], c);
  ConvParams p = params(a);
  Values out;
  if (p.transposed) {
    // y = conv_transpose(x, w) is the input-gradient of conv(., w): its own input-gradient is
    // conv(g, w), and its weight-gradient that of conv with g and x in swapped roles.
    ConvParams forward_params = p;
    forward_params.transposed = false;
    // Padded on the high side to give exactly x's size (output_padding added rows past it).
    size_t n = g.shape.rank() - 2;
    Dims ks = spatial_of(w), os = spatial_of(g), is = spatial_of(x);
    std::vector<std::pair<int64_t, int64_t>> pads;
    for (size_t i = 0; i < n; ++i) {
      int64_t span = p.dilation[i] * (ks[i] - 1) + 1;
      pads.push_back({p.padding[i], (is[i] - 1) * p.stride[i] + span - os[i] - p.padding[i]});
    }
    std::string io = layout("b", "f", n), oi = layout("o", "i", n);
    out.push_back(convert(b, conv(b, g, w, x.shape.dims, p.stride, pads, Dims(n, 1), p.dilation,
                                  p.groups, 1, io, oi, io), t));
    out.push_back(convert(b, grad_weight(b, g, x, forward_params, w.shape.dims),
                          a.has("type1") ? out_type(a, 1) : t));
  } else {
    out.push_back(convert(b, grad_input(b, g, w, p, x.shape.dims), t));
    out.push_back(convert(b, grad_weight(b, x, g, p, w.shape.dims),
                          a.has("type1") ? out_type(a, 1) : t));
  }
  Dims axes{0};
  for (size_t d = 2; d < g.shape.rank(); ++d) axes.push_back(static_cast<int64_t>(d));
  Value gb = reduce(b, g, axes, constant(b, c, 0), "stablehlo.add");
  out.push_back(convert(b, gb, a.has("type2") ? out_type(a, 2) : t));
  return out;
}

}  // namespace

void register_conv_rules(Registry& r) {
  r.add("convolution", convolution);
  r.add("convolution_backward", convolution_backward);
}

}  // namespace torchtpu::lowering
