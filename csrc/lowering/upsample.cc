// Upsampling (nearest, nearest-exact, linear, cubic, antialiased linear and cubic) over the
// trailing spatial dims, one dimension at a time, and its gradients. Source positions and weights
// follow PyTorch's CPU formulas (ATen/native/UpSample.h) in the op's own precision (float for
// float32 and below, double for float64), computed when the program is built: the scales are static
// attributes.
#include <algorithm>
#include <cmath>
#include <optional>

#include "lowering/arith.h"
#include "lowering/helpers.h"
#include "lowering/registry.h"
#include "lowering/resample.h"

namespace torchtpu::lowering {
namespace {

enum class Mode { kNearest, kNearestExact, kLinear, kCubic, kLinearAA, kCubicAA };

template <typename T>
T compute_scale(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0 ? static_cast<T>(1.0 / *scale) : static_cast<T>(in) / out;
}

template <typename T>
T pixel_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / (out - 1) : T(0);
  return compute_scale<T>(scale, in, out);
}

template <typename T>
T source_index(T scale, int64_t dst, bool align_corners, bool cubic) {
  if (align_corners) return scale * dst;
  T src = scale * (dst + static_cast<T>(0.5)) - static_cast<T>(0.5);
  return !cubic && src < T(0) ? T(0) : src;
}

Taps nearest_taps(int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  Taps taps(in, out, 1);
  taps.unit = true;
  float s = compute_scale<float>(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact) {
      i = std::min(static_cast<int64_t>(floorf((o + 0.5) * s)), in - 1);
    } else if (out == in) {
      i = o;
    } else if (out == 2 * in) {
      i = o >> 1;
    } else {
      i = std::min(static_cast<int64_t>(floorf(o * s)), in - 1);
    }
    taps.set(o, 0, i, 1);
  }
  return taps;
}

template <typename T>
Taps linear_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps taps(in, out, 2);
  T ratio = pixel_scale<T>(in, out, align_corners, scale);
  for (int64_t o = 0; o < out; ++o) {
    if (out == in) {
      taps.set(o, 0, o, 1);
      taps.set(o, 1, o, 0);
      continue;
    }
    T real = source_index<T>(ratio, o, align_corners, false);
    int64_t i0 = std::min(static_cast<int64_t>(floorf(real)), in - 1);
    T l1 = std::min(std::max(real - i0, T(0)), T(1));
    T l0 = T(1) - l1;
    taps.set(o, 0, i0, l0);
    taps.set(o, 1, i0 + (i0 < in - 1 ? 1 : 0), l1);
  }
  return taps;
}

template <typename T>
T cubic1(T x, T a) {
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
template <typename T>
T cubic2(T x, T a) {
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

template <typename T>
Taps cubic_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps taps(in, out, 4);
  T ratio = pixel_scale<T>(in, out, align_corners, scale);
  const T a = -0.75;
  for (int64_t o = 0; o < out; ++o) {
    T real = source_index<T>(ratio, o, align_corners, true);
    int64_t i = std::min(static_cast<int64_t>(floorf(real)), in - 1);
    T t = std::min(std::max(real - i, T(0)), T(1));
    T w[4] = {cubic2<T>(t + T(1), a), cubic1<T>(t, a), cubic1<T>(T(1) - t, a),
              cubic2<T>(T(1) - t + T(1), a)};
    for (int64_t k = 0; k < 4; ++k) {
      taps.set(o, k, std::max<int64_t>(std::min<int64_t>(i - 1 + k, in - 1), 0), w[k]);
    }
  }
  return taps;
}

// Antialiased (PIL-style) filters: the triangle, and Keys' cubic with a = -0.5.
template <typename T>
T aa_filter(T x, bool cubic) {
  x = x < T(0) ? -x : x;
  if (!cubic) return x < T(1) ? T(1) - x : T(0);
  const T a = -0.5;
  if (x < T(1)) return cubic1<T>(x, a);
  if (x < T(2)) return cubic2<T>(x, a);
  return T(0);
}

// Antialiasing widens the filter by the downscaling factor and normalizes each output's weights.
template <typename T>
Taps aa_taps(int64_t in, int64_t out, bool align_corners, std::optional<double> scale, bool cubic) {
  const int64_t interp = cubic ? 4 : 2;
  T s = pixel_scale<T>(in, out, align_corners, scale);
  T support = s >= 1.0 ? static_cast<T>((interp * 0.5) * s) : static_cast<T>(interp * 0.5);
  int64_t width = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  T invscale = s >= 1.0 ? static_cast<T>(1.0 / s) : T(1);
  Taps taps(in, out, width);
  for (int64_t o = 0; o < out; ++o) {
    T center = static_cast<T>(s * (o + 0.5));
    int64_t lo = std::max(static_cast<int64_t>(center - support + 0.5), int64_t{0});
    int64_t size = std::min(static_cast<int64_t>(center + support + 0.5), in) - lo;
    size = std::clamp<int64_t>(size, 0, width);
    std::vector<T> w(size);
    T total = 0;
    for (int64_t j = 0; j < size; ++j) {
      w[j] = aa_filter<T>(static_cast<T>((j + lo - center + 0.5) * invscale), cubic);
      total += w[j];
    }
    for (int64_t j = 0; j < size; ++j) taps.set(o, j, lo + j, total != T(0) ? w[j] / total : w[j]);
  }
  return taps;
}

// The scale attribute of spatial dim `d` of `n`: scales (1-d), scales_h/_w, scales_d/_h/_w.
std::optional<double> scale_of(const Attrs& a, size_t d, size_t n) {
  static const char* const kNames[] = {"scales_d", "scales_h", "scales_w"};
  std::string name = n == 1 ? "scales" : kNames[3 - n + d];
  if (!a.has(name)) return std::nullopt;
  return a.f(name);
}

Taps taps_for(Mode mode, ElementType t, int64_t in, int64_t out, const Attrs& a, size_t d,
              size_t n) {
  std::optional<double> scale = scale_of(a, d, n);
  bool align = a.has("align_corners") && a.i("align_corners") != 0;
  bool wide = t == ElementType::kF64;
  switch (mode) {
    case Mode::kNearest:
      return nearest_taps(in, out, scale, false);
    case Mode::kNearestExact:
      return nearest_taps(in, out, scale, true);
    case Mode::kLinear:
      return wide ? linear_taps<double>(in, out, align, scale)
                  : linear_taps<float>(in, out, align, scale);
    case Mode::kCubic:
      return wide ? cubic_taps<double>(in, out, align, scale)
                  : cubic_taps<float>(in, out, align, scale);
    case Mode::kLinearAA:
      return wide ? aa_taps<double>(in, out, align, scale, false)
                  : aa_taps<float>(in, out, align, scale, false);
    case Mode::kCubicAA:
      return wide ? aa_taps<double>(in, out, align, scale, true)
                  : aa_taps<float>(in, out, align, scale, true);
  }
  return nearest_taps(in, out, scale, false);
}

// An integer image's pass, as the CPU stores it between passes: rounded half up and saturated to
// the type's range.
Value saturate(FunctionBuilder& b, const Value& x, ElementType t) {
  Value rounded = unary(b, "stablehlo.floor", add(b, x, full(b, x.shape.type, x.shape.dims, 0.5)));
  Value low = splat(b, extreme(b, t, false), x.shape.type, x.shape.dims);
  Value high = splat(b, extreme(b, t, true), x.shape.type, x.shape.dims);
  return minimum(b, maximum(b, rounded, low), high);
}

// upsample_*(self, output_size, [align_corners,] scales...). An integer (uint8) image is
// interpolated in float32 and rounded after each dimension's pass, as the CPU's separable kernel.
LoweringRule upsample(Mode mode, size_t n) {
  return [mode, n](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a);
    bool nearest = mode == Mode::kNearest || mode == Mode::kNearestExact;
    bool integral = !hlo::is_floating(t) && !hlo::is_complex(t);
    ElementType c = nearest ? t : integral ? ElementType::kF32 : opmath(t);
    Value x = convert(b, v[0], c);
    Dims out = out_shape(a);
    size_t lead = out.size() - n;
    for (size_t d = n; d-- > 0;) {
      int64_t dim = static_cast<int64_t>(lead + d);
      x = resample(b, x, dim, taps_for(mode, t, x.shape.dims[dim], out[dim], a, d, n));
      if (integral && !nearest) x = saturate(b, x, t);
    }
    return Values{convert(b, x, t)};
  };
}

// upsample_*_backward(grad_output, output_size, input_size, [align_corners,] scales...)
LoweringRule upsample_backward(Mode mode, size_t n) {
  return [mode, n](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a), c = opmath(t);
    Value g = convert(b, v[0], c);
    Dims in = out_shape(a);
    size_t lead = in.size() - n;
    for (size_t d = 0; d < n; ++d) {
      int64_t dim = static_cast<int64_t>(lead + d);
      g = resample_transpose(b, g, dim, taps_for(mode, t, in[dim], g.shape.dims[dim], a, d, n));
    }
    return Values{convert(b, g, t)};
  };
}

void add(Registry& r, const std::string& name, Mode mode, size_t n) {
  r.add(name, upsample(mode, n), {name, name + ".out"});
  r.add(name + "_backward", upsample_backward(mode, n),
        {name + "_backward", name + "_backward.grad_input"});
}

}  // namespace

void register_upsample_rules(Registry& r) {
  add(r, "upsample_nearest1d", Mode::kNearest, 1);
  add(r, "upsample_nearest2d", Mode::kNearest, 2);
  add(r, "upsample_nearest3d", Mode::kNearest, 3);
  add(r, "_upsample_nearest_exact1d", Mode::kNearestExact, 1);
  add(r, "_upsample_nearest_exact2d", Mode::kNearestExact, 2);
  add(r, "_upsample_nearest_exact3d", Mode::kNearestExact, 3);
  add(r, "upsample_linear1d", Mode::kLinear, 1);
  add(r, "upsample_bilinear2d", Mode::kLinear, 2);
  add(r, "upsample_trilinear3d", Mode::kLinear, 3);
  add(r, "upsample_bicubic2d", Mode::kCubic, 2);
  add(r, "_upsample_bilinear2d_aa", Mode::kLinearAA, 2);
  add(r, "_upsample_bicubic2d_aa", Mode::kCubicAA, 2);
}

}  // namespace torchtpu::lowering
