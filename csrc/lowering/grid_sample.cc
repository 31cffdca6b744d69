// grid_sampler_2d/3d and their gradients: bilinear (trilinear), nearest and (2-d) bicubic sampling
// of input [N, C, *in] at the points of grid [N, *out, n] (x first), with PyTorch's padding modes
// (zeros, border, reflection) and align_corners, following ATen/native/GridSampler.h. The points
// are values, so the corners are gathered (and the gradient scattered) on the device.
#include <utility>

#include "lowering/registry.h"
#include "lowering/resample.h"

namespace torchtpu::lowering {
namespace {

enum Interpolation : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };

struct Sampling {
  int64_t interpolation, padding;
  bool align;
};

Sampling sampling(const Attrs& a) {
  return {a.i("interpolation_mode"), a.i("padding_mode"), a.i("align_corners") != 0};
}

Value fill(FunctionBuilder& b, const Value& like, double v) {
  return full(b, like.shape.type, like.shape.dims, v);
}
// A coordinate clipped to [0, size - 1]; `grad` (when asked) is 1 strictly inside, else 0.
Value clip(FunctionBuilder& b, const Value& x, int64_t size, Value* grad) {
  Value high = fill(b, x, static_cast<double>(size - 1)), zero = fill(b, x, 0);
  if (grad) {
    Value inside = b_and(b, compare(b, x, zero, "GT"), compare(b, x, high, "LT"));
    *grad = binary(b, "stablehlo.multiply", *grad, select(b, inside, fill(b, x, 1), zero));
  }
  return minimum(b, high, maximum(b, x, zero));
}

// The coordinate reflected into [twice_low / 2, twice_high / 2]; `grad` gets the reflection's
// sign.
Value reflect(FunctionBuilder& b, const Value& x, int64_t twice_low, int64_t twice_high,
              Value* grad) {
  if (twice_low == twice_high) {
    if (grad) *grad = fill(b, x, 0);
    return fill(b, x, 0);
  }
  Value min = fill(b, x, twice_low / 2.0), span = fill(b, x, (twice_high - twice_low) / 2.0);
  Value in = binary(b, "stablehlo.subtract", x, min);
  Value negative = compare(b, in, fill(b, x, 0), "LT");
  in = unary(b, "stablehlo.abs", in);
  Value extra = binary(b, "stablehlo.remainder", in, span);
  Value flips = unary(b, "stablehlo.floor", binary(b, "stablehlo.divide", in, span));
  Value even =
      compare(b, binary(b, "stablehlo.remainder", flips, fill(b, x, 2)), fill(b, x, 0), "EQ");
  if (grad) {
    Value sign = select(b, negative, fill(b, x, -1), fill(b, x, 1));
    *grad = binary(b, "stablehlo.multiply", *grad,
                   select(b, even, sign, unary(b, "stablehlo.negate", sign)));
  }
  return select(b, even, binary(b, "stablehlo.add", extra, min),
                binary(b, "stablehlo.add", binary(b, "stablehlo.subtract", span, extra), min));
}

// The coordinate moved inside by the padding mode (border, reflection); zeros keeps it.
Value pad_coordinate(FunctionBuilder& b, Value coord, int64_t size, const Sampling& s,
                     Value* grad) {
  if (s.padding == kBorder) {
    coord = clip(b, coord, size, grad);
  } else if (s.padding == kReflection) {
    coord = s.align ? reflect(b, coord, 0, 2 * (size - 1), grad)
                    : reflect(b, coord, -1, 2 * size - 1, grad);
    coord = clip(b, coord, size, grad);
  }
  return coord;
}

// The source position along a dimension of `size` of normalized coordinate `x`; `grad` (when
// given) is d position / d x.
Value source_index(FunctionBuilder& b, const Value& x, int64_t size, const Sampling& s,
                   Value* grad) {
  Value one = fill(b, x, 1);
  Value coord;
  if (s.align) {
    coord = binary(b, "stablehlo.multiply",
                   binary(b, "stablehlo.divide", binary(b, "stablehlo.add", x, one), fill(b, x, 2)),
                   fill(b, x, static_cast<double>(size - 1)));
    if (grad) *grad = fill(b, x, (size - 1) / 2.0);
  } else {
    coord = binary(b, "stablehlo.divide",
                   binary(b, "stablehlo.subtract",
                          binary(b, "stablehlo.multiply", binary(b, "stablehlo.add", x, one),
                                 fill(b, x, static_cast<double>(size))),
                          one),
                   fill(b, x, 2));
    if (grad) *grad = fill(b, x, size / 2.0);
  }
  // Bicubic sampling pads each of its taps instead of the point.
  return s.interpolation == kBicubic ? coord : pad_coordinate(b, coord, size, s, grad);
}

// One corner of every sampling point: its index along each spatial dim and whether it is inside.
struct Corner {
  std::vector<Value> index;  // s64 [N, *out], clamped into range
  Value inside;              // pred [N, *out]
};

Corner corner(FunctionBuilder& b, const std::vector<Value>& position, const Dims& sizes) {
  Corner c;
  for (size_t k = 0; k < position.size(); ++k) {
    const Value& p = position[k];
    Value in = b_and(b, compare(b, p, fill(b, p, 0), "GE"),
                     compare(b, p, fill(b, p, static_cast<double>(sizes[k] - 1)), "LE"));
    c.inside = k == 0 ? in : b_and(b, c.inside, in);
    Value clamped =
        minimum(b, maximum(b, p, fill(b, p, 0)), fill(b, p, static_cast<double>(sizes[k] - 1)));
    c.index.push_back(convert(b, clamped, ElementType::kS64));
  }
  return c;
}

// [N, *out, n + 1]: the batch and the corner's spatial indices of every point.
Value gather_indices(FunctionBuilder& b, const Corner& c) {
  Dims with_one = c.inside.shape.dims;
  with_one.push_back(1);
  std::vector<Value> parts{
      reshape(b, iota(b, ElementType::kS64, c.inside.shape.dims, 0), with_one)};
  for (const Value& i : c.index) parts.push_back(reshape(b, i, with_one));
  return concatenate(b, parts, static_cast<int64_t>(with_one.size() - 1));
}

std::string sample_dims(size_t n, bool scatter_form) {
  Dims axes{0};
  for (size_t k = 0; k < n; ++k) axes.push_back(static_cast<int64_t>(k + 2));
  std::string window = FunctionBuilder::i64_list({static_cast<int64_t>(n + 1)});
  std::string list = FunctionBuilder::i64_list(axes);
  if (scatter_form) {
    return "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = " + window +
           ", inserted_window_dims = " + list + ", scatter_dims_to_operand_dims = " + list +
           ", index_vector_dim = " + std::to_string(n + 1) + ">";
  }
  return "dimension_numbers = #stablehlo.gather<offset_dims = " + window +
         ", collapsed_slice_dims = " + list + ", start_index_map = " + list +
         ", index_vector_dim = " + std::to_string(n + 1) + ">";
}

// input [N, C, *in] at one corner of every point: [N, *out, C], zero outside.
Value sample(FunctionBuilder& b, const Value& input, const Corner& c) {
  size_t n = c.index.size();
  Dims out = c.inside.shape.dims, slice_sizes(input.shape.rank(), 1);
  out.push_back(input.shape.dims[1]);
  slice_sizes[1] = input.shape.dims[1];
  Value v =
      b.op("stablehlo.gather", {input, gather_indices(b, c)}, Shape{input.shape.type, out},
           sample_dims(n, false) + ", slice_sizes = " + FunctionBuilder::i64_array(slice_sizes) +
               ", indices_are_sorted = false");
  Dims point_dims;
  for (size_t d = 0; d <= n; ++d) point_dims.push_back(static_cast<int64_t>(d));
  return select(b, broadcast_in_dim(b, c.inside, out, point_dims), v,
                full(b, input.shape.type, out, 0));
}

Dims point_dims(size_t n) {
  Dims d;
  for (size_t k = 0; k <= n; ++k) d.push_back(static_cast<int64_t>(k));
  return d;
}

// The grid's coordinate for spatial dim k ([N, *out]); the grid lists x (the last dim) first.
Value grid_coordinate(FunctionBuilder& b, const Value& grid, size_t k, size_t n) {
  Dims start(grid.shape.rank(), 0), limit = grid.shape.dims;
  start.back() = static_cast<int64_t>(n - 1 - k);
  limit.back() = start.back() + 1;
  Dims point(grid.shape.dims.begin(), grid.shape.dims.end() - 1);
  return reshape(b, slice(b, grid, start, limit), point);
}

struct Points {
  std::vector<Value> position, low, frac, grad;  // per spatial dim, [N, *out]
};

Points points(FunctionBuilder& b, const Value& grid, const Dims& sizes, const Sampling& s,
              bool with_grad) {
  size_t n = sizes.size();
  Points p;
  for (size_t k = 0; k < n; ++k) {
    Value g;
    Value pos =
        source_index(b, grid_coordinate(b, grid, k, n), sizes[k], s, with_grad ? &g : nullptr);
    p.position.push_back(pos);
    p.grad.push_back(g);
    Value low = unary(
        b, s.interpolation == kNearest ? "stablehlo.round_nearest_even" : "stablehlo.floor", pos);
    p.low.push_back(low);
    p.frac.push_back(binary(b, "stablehlo.subtract", pos, low));
  }
  return p;
}

// Corner `bits` (bit n-1-k set: the upper neighbour along dim k) of the points.
std::vector<Value> corner_position(FunctionBuilder& b, const Points& p, size_t bits) {
  size_t n = p.low.size();
  std::vector<Value> at;
  for (size_t k = 0; k < n; ++k) {
    bool up = (bits >> (n - 1 - k)) & 1;
    at.push_back(up ? binary(b, "stablehlo.add", p.low[k], fill(b, p.low[k], 1)) : p.low[k]);
  }
  return at;
}

// The corner's weight; with `skip` = k, its derivative along dim k instead.
Value corner_weight(FunctionBuilder& b, const Points& p, size_t bits, int64_t skip = -1) {
  size_t n = p.low.size();
  Value w;
  for (size_t k = 0; k < n; ++k) {
    bool up = (bits >> (n - 1 - k)) & 1;
    Value f =
        static_cast<int64_t>(k) == skip
            ? fill(b, p.frac[k], up ? 1 : -1)
            : (up ? p.frac[k] : binary(b, "stablehlo.subtract", fill(b, p.frac[k], 1), p.frac[k]));
    w = k == 0 ? f : binary(b, "stablehlo.multiply", w, f);
  }
  return w;
}

Dims spatial_sizes(const Value& input) {
  return Dims(input.shape.dims.begin() + 2, input.shape.dims.end());
}

// [N, *out, C] -> [N, C, *out] and back.
Value channels_first(FunctionBuilder& b, const Value& v) {
  Dims perm{0, static_cast<int64_t>(v.shape.rank() - 1)};
  for (size_t d = 1; d + 1 < v.shape.rank(); ++d) perm.push_back(static_cast<int64_t>(d));
  return transpose(b, v, perm);
}
Value channels_last(FunctionBuilder& b, const Value& v) {
  Dims perm{0};
  for (size_t d = 2; d < v.shape.rank(); ++d) perm.push_back(static_cast<int64_t>(d));
  perm.push_back(1);
  return transpose(b, v, perm);
}

size_t corners(const Sampling& s, size_t n) { return s.interpolation == kNearest ? 1 : 1u << n; }

// Keys' cubic convolution weights (A = -0.75) of the 4 taps around a point at fraction t, and
// their derivatives as PyTorch's backward uses them (of the weight w.r.t. -t).
std::vector<Value> cubic_weights(FunctionBuilder& b, const Value& t, bool derivative) {
  auto k = [&](double v) { return fill(b, t, v); };
  auto mul = [&](const Value& x, const Value& y) { return binary(b, "stablehlo.multiply", x, y); };
  auto plus = [&](const Value& x, const Value& y) { return binary(b, "stablehlo.add", x, y); };
  auto minus = [&](const Value& x, const Value& y) {
    return binary(b, "stablehlo.subtract", x, y);
  };
  const double a = -0.75;
  std::vector<Value> w;
  if (!derivative) {
    // ((a + 2) x - (a + 3)) x x + 1 for |x| <= 1; ((a x - 5a) x + 8a) x - 4a for 1 < |x| < 2.
    auto near = [&](const Value& x) {
      return plus(mul(mul(minus(mul(k(a + 2), x), k(a + 3)), x), x), k(1));
    };
    auto far = [&](const Value& x) {
      return minus(mul(plus(mul(minus(mul(k(a), x), k(5 * a)), x), k(8 * a)), x), k(4 * a));
    };
    Value u = minus(k(1), t);
    return {far(plus(t, k(1))), near(t), near(u), far(plus(u, k(1)))};
  }
  Value x0 = minus(k(-1), t), x1 = unary(b, "stablehlo.negate", t), x2 = minus(k(1), t),
        x3 = minus(k(2), t);
  w.push_back(minus(mul(minus(mul(k(-3 * a), x0), k(10 * a)), x0), k(8 * a)));
  w.push_back(mul(minus(mul(k(-3 * (a + 2)), x1), k(2 * (a + 3))), x1));
  w.push_back(mul(minus(mul(k(3 * (a + 2)), x2), k(2 * (a + 3))), x2));
  w.push_back(plus(mul(minus(mul(k(3 * a), x3), k(10 * a)), x3), k(8 * a)));
  return w;
}

struct Bicubic {
  Value out, grad_input, grad_grid;
};

// Bicubic sampling of input [N, C, H, W] at grid [N, Ho, Wo, 2]: the 4x4 taps around each point,
// each tap moved inside by the padding mode (zero outside). With `g` [N, Ho, Wo, C] it gives the
// gradients instead.
Bicubic bicubic(FunctionBuilder& b, const Value& input, const Value& grid, const Sampling& s,
                const Value* g) {
  Dims sizes = spatial_sizes(input);
  Value gx, gy;
  Value x = source_index(b, grid_coordinate(b, grid, 1, 2), sizes[1], s, &gx);
  Value y = source_index(b, grid_coordinate(b, grid, 0, 2), sizes[0], s, &gy);
  Value x0 = unary(b, "stablehlo.floor", x), y0 = unary(b, "stablehlo.floor", y);
  Value tx = binary(b, "stablehlo.subtract", x, x0), ty = binary(b, "stablehlo.subtract", y, y0);
  std::vector<Value> cx = cubic_weights(b, tx, false), cy = cubic_weights(b, ty, false);
  Dims points = x.shape.dims, values = points;
  values.push_back(input.shape.dims[1]);
  auto spread = [&](const Value& w) { return broadcast_in_dim(b, w, values, point_dims(2)); };
  auto mul = [&](const Value& p, const Value& q) { return binary(b, "stablehlo.multiply", p, q); };
  std::vector<Value> cxd, cyd;
  if (g) cxd = cubic_weights(b, tx, true), cyd = cubic_weights(b, ty, true);
  Bicubic r;
  Value grad_input = full(b, input.shape.type, input.shape.dims, 0), gix, giy;
  for (int64_t i = 0; i < 4; ++i) {
    Value row;
    Value yi = pad_coordinate(b, binary(b, "stablehlo.add", y0, fill(b, y0, i - 1.0)), sizes[0], s,
                              nullptr);
    for (int64_t j = 0; j < 4; ++j) {
      Value xj = pad_coordinate(b, binary(b, "stablehlo.add", x0, fill(b, x0, j - 1.0)), sizes[1],
                                s, nullptr);
      Corner cn = corner(b, {yi, xj}, sizes);
      Value val = sample(b, input, cn);
      if (!g) {
        Value term = mul(val, spread(cx[j]));
        row = j == 0 ? term : binary(b, "stablehlo.add", row, term);
        continue;
      }
      Value share = mul(*g, spread(mul(cx[j], cy[i])));
      share = select(b, broadcast_in_dim(b, cn.inside, values, point_dims(2)), share,
                     fill(b, share, 0));
      grad_input = scatter(b, grad_input, gather_indices(b, cn), share, true, sample_dims(2, true));
      Value dot = reduce(b, mul(val, *g), {3}, constant(b, val.shape.type, 0), "stablehlo.add");
      Value dx = mul(dot, mul(cxd[j], cy[i])), dy = mul(dot, mul(cyd[i], cx[j]));
      bool first = i == 0 && j == 0;
      gix = first ? unary(b, "stablehlo.negate", dx) : binary(b, "stablehlo.subtract", gix, dx);
      giy = first ? unary(b, "stablehlo.negate", dy) : binary(b, "stablehlo.subtract", giy, dy);
    }
    if (!g) {
      Value term = mul(row, spread(cy[i]));
      r.out = i == 0 ? term : binary(b, "stablehlo.add", r.out, term);
    }
  }
  if (g) {
    Dims with_one = points;
    with_one.push_back(1);
    r.grad_input = grad_input;
    r.grad_grid =
        concatenate(b, {reshape(b, mul(gix, gx), with_one), reshape(b, mul(giy, gy), with_one)}, 3);
  }
  return r;
}

// grid_sampler_2d/3d(input, grid, interpolation_mode, padding_mode, align_corners)
Values grid_sampler(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = opmath(t);
  Sampling s = sampling(a);
  Value input = convert(b, v[0], c), grid = convert(b, v[1], c);
  Dims out = out_shape(a);
  if (input.shape.numel() == 0 || grid.shape.numel() == 0) return {full(b, t, out, 0)};
  Dims sizes = spatial_sizes(input);
  size_t n = sizes.size();
  if (s.interpolation == kBicubic) {
    if (n != 2) throw Unsupported("torchtpu: bicubic grid_sampler_3d");
    return {convert(b, channels_first(b, bicubic(b, input, grid, s, nullptr).out), t)};
  }
  Points p = points(b, grid, sizes, s, false);
  Value acc;
  for (size_t bits = 0; bits < corners(s, n); ++bits) {
    Value val = sample(b, input, corner(b, corner_position(b, p, bits), sizes));
    if (s.interpolation == kBilinear) {
      val = binary(b, "stablehlo.multiply", val,
                   broadcast_in_dim(b, corner_weight(b, p, bits), val.shape.dims, point_dims(n)));
    }
    acc = bits == 0 ? val : binary(b, "stablehlo.add", acc, val);
  }
  return {convert(b, channels_first(b, acc), t)};
}

// grid_sampler_2d/3d_backward(grad_output, input, grid, interpolation_mode, padding_mode,
// align_corners, output_mask) -> (grad_input, grad_grid)
Values grid_sampler_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Sampling s = sampling(a);
  ElementType ti = a.has("type") ? out_type(a) : v[1].shape.type;
  ElementType tg = a.has("type1") ? out_type(a, 1) : v[2].shape.type;
  ElementType c = opmath(ti);
  Value g = convert(b, v[0], c), input = convert(b, v[1], c), grid = convert(b, v[2], c);
  Dims sizes = spatial_sizes(input);
  size_t n = sizes.size();
  if (g.shape.numel() == 0 || input.shape.numel() == 0) {
    return {full(b, ti, input.shape.dims, 0), full(b, tg, grid.shape.dims, 0)};
  }
  Value gt = channels_last(b, g);  // [N, *out, C]
  if (s.interpolation == kBicubic) {
    if (n != 2) throw Unsupported("torchtpu: bicubic grid_sampler_3d");
    Bicubic r = bicubic(b, input, grid, s, &gt);
    return {convert(b, r.grad_input, ti), convert(b, r.grad_grid, tg)};
  }
  Points p = points(b, grid, sizes, s, true);
  Value grad_input = full(b, c, input.shape.dims, 0);
  std::vector<Value> grad_position(n);
  for (size_t bits = 0; bits < corners(s, n); ++bits) {
    Corner cn = corner(b, corner_position(b, p, bits), sizes);
    Value share = gt;
    if (s.interpolation == kBilinear) {
      share = binary(b, "stablehlo.multiply", gt,
                     broadcast_in_dim(b, corner_weight(b, p, bits), gt.shape.dims, point_dims(n)));
    }
    share = select(b, broadcast_in_dim(b, cn.inside, gt.shape.dims, point_dims(n)), share,
                   fill(b, share, 0));
    grad_input = scatter(b, grad_input, gather_indices(b, cn), share, true, sample_dims(n, true));
    if (s.interpolation != kBilinear) continue;
    // d out / d position_k = sum over C of value * grad * d weight / d position_k.
    Value dot = reduce(b, binary(b, "stablehlo.multiply", sample(b, input, cn), gt),
                       {static_cast<int64_t>(n + 1)}, constant(b, c, 0), "stablehlo.add");
    for (size_t k = 0; k < n; ++k) {
      Value term =
          binary(b, "stablehlo.multiply", dot, corner_weight(b, p, bits, static_cast<int64_t>(k)));
      grad_position[k] = bits == 0 ? term : binary(b, "stablehlo.add", grad_position[k], term);
    }
  }
  Dims with_one(grid.shape.dims.begin(), grid.shape.dims.end() - 1);
  with_one.push_back(1);
  Value grad_grid = full(b, c, grid.shape.dims, 0);
  if (s.interpolation == kBilinear) {
    std::vector<Value> parts;
    for (size_t k = n; k-- > 0;) {
      parts.push_back(
          reshape(b, binary(b, "stablehlo.multiply", grad_position[k], p.grad[k]), with_one));
    }
    grad_grid = concatenate(b, parts, static_cast<int64_t>(with_one.size() - 1));
  }
  return {convert(b, grad_input, ti), convert(b, grad_grid, tg)};
}

}  // namespace

void register_grid_sample_rules(Registry& r) {
  for (const std::string d : {"2d", "3d"}) {
    r.add("grid_sampler_" + d, grid_sampler, {"grid_sampler_" + d, "grid_sampler_" + d + ".out"});
    r.add("grid_sampler_" + d + "_backward", grid_sampler_backward,
          {"grid_sampler_" + d + "_backward", "grid_sampler_" + d + "_backward.out"});
  }
}

}  // namespace torchtpu::lowering
