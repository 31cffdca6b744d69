// PyTorch's FFT primitives on stablehlo.fft, which transforms the innermost 1-3 dims: the
// requested dims are moved innermost (in order), transformed, and moved back. XLA's inverse
// transforms divide by the signal size; PyTorch's primitives apply their own `normalization`
// (0: none, 1: 1/sqrt(n), 2: 1/n), so the inverse results are rescaled to that.
#include <cmath>
#include <algorithm>

#include "lowering/helpers.h"
#include "lowering/matrix.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// The permutation that moves `dims` (in their order) behind every other dim.
Dims innermost(const Dims& dims, int64_t rank) {
  Dims perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) perm.push_back(d);
  }
  perm.insert(perm.end(), dims.begin(), dims.end());
  return perm;
}

Dims inverse_of(const Dims& perm) {
  Dims inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
  return inv;
}

Value scale(FunctionBuilder& b, const Value& x, double factor) {
  if (factor == 1) return x;
  ElementType t = x.shape.type;
  Value s = convert(b, full(b, real_part(t), x.shape.dims, factor), t);
  return binary(b, "stablehlo.multiply", x, s);
}

// normalization applied to a transform of `n` points, times `undo` (XLA's own 1/n of an inverse).
double norm_factor(int64_t normalization, double n, double undo = 1) {
  double f = normalization == 1 ? 1 / std::sqrt(n) : normalization == 2 ? 1 / n : 1;
  return f * undo;
}

// stablehlo.fft of `kind` over the innermost `lengths.size()` (<= 3) dims of x.
Value fft_op(FunctionBuilder& b, const Value& x, const std::string& kind, const Dims& lengths,
             const Shape& result) {
  return b.op("stablehlo.fft", {x}, result,
              "fft_type = #stablehlo<fft_type " + kind + ">, fft_length = " +
                  FunctionBuilder::i64_array(lengths));
}

// A complex-to-complex transform over `dims` (any number), forward or inverse, unnormalized.
Value c2c(FunctionBuilder& b, Value x, Dims dims, bool forward) {
  int64_t rank = static_cast<int64_t>(x.shape.rank());
  while (!dims.empty()) {
    size_t take = std::min<size_t>(3, dims.size());
    Dims group(dims.end() - take, dims.end());
    dims.resize(dims.size() - take);
    Dims perm = innermost(group, rank);
    Value moved = transpose(b, x, perm);
    Dims lengths(moved.shape.dims.end() - take, moved.shape.dims.end());
    double n = 1;
    for (int64_t l : lengths) n *= static_cast<double>(l);
    if (n == 0) continue;
    Value y = fft_op(b, moved, forward ? "FFT" : "IFFT", lengths, moved.shape);
    if (!forward) y = scale(b, y, n);
    x = transpose(b, y, inverse_of(perm));
  }
  return x;
}

Dims fft_dims(const Attrs& a, int64_t rank) { return reduction_dims(a, "dim", rank); }

double signal_size(const Dims& sizes, const Dims& dims) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(sizes[d]);
  return n;
}

// _fft_c2c(self, dim, normalization, forward).
Values fft_c2c(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Value x = convert(b, v[0], t);
  Dims dims = fft_dims(a, static_cast<int64_t>(x.shape.rank()));
  Value y = c2c(b, x, dims, a.i("forward"));
  return {scale(b, y, norm_factor(a.i("normalization"), signal_size(x.shape.dims, dims)))};
}

// _fft_r2c(self, dim, normalization, onesided): the last dim halved when onesided.
Values fft_r2c(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  const Value& x = v[0];
  int64_t rank = static_cast<int64_t>(x.shape.rank());
  Dims dims = fft_dims(a, rank);
  double n = signal_size(x.shape.dims, dims);
  Value y;
  if (!a.i("onesided") || n == 0) {
    y = c2c(b, convert(b, x, t), dims, true);
    if (n == 0) y = full(b, t, out_shape(a), 0);
  } else {
    int64_t last = dims.back();
    Dims perm = innermost({last}, rank);
    Value moved = transpose(b, convert(b, x, real_part(t)), perm);
    Dims half = moved.shape.dims;
    half.back() = half.back() / 2 + 1;
    y = fft_op(b, moved, "RFFT", {moved.shape.dims.back()}, Shape{t, half});
    y = transpose(b, y, inverse_of(perm));
    dims.pop_back();
    y = c2c(b, y, dims, true);
  }
  return {scale(b, y, norm_factor(a.i("normalization"), n))};
}

// _fft_c2r(self, dim, normalization, last_dim_size): inverse, the last dim's Hermitian half in.
Values fft_c2r(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a), c = v[0].shape.type;
  int64_t rank = static_cast<int64_t>(v[0].shape.rank());
  Dims dims = fft_dims(a, rank);
  int64_t last = dims.back(), n_last = a.i("last_dim_size");
  Dims out = out_shape(a);
  double n = signal_size(out, dims);
  if (n == 0) return {full(b, t, out, 0)};
  Dims rest(dims.begin(), dims.end() - 1);
  Value x = c2c(b, v[0], rest, false);
  // XLA reads exactly n_last / 2 + 1 points of the last dim.
  int64_t want = n_last / 2 + 1, have = x.shape.dims[last];
  if (have > want) {
    Dims start(rank, 0), limit = x.shape.dims;
    limit[last] = want;
    x = slice(b, x, start, limit);
  } else if (have < want) {
    Dims high(rank, 0);
    high[last] = want - have;
    x = pad_high(b, x, high);
  }
  Dims perm = innermost({last}, rank);
  Value moved = transpose(b, x, perm);
  Dims real_dims = moved.shape.dims;
  real_dims.back() = n_last;
  Value y = fft_op(b, moved, "IRFFT", {n_last}, Shape{real_part(c), real_dims});
  y = transpose(b, y, inverse_of(perm));
  return {convert(b, scale(b, y, norm_factor(a.i("normalization"), n, static_cast<double>(n_last))),
                  t)};
}

}  // namespace

void register_fft_rules(Registry& r) {
  auto add = [&r](const std::string& op, LoweringRule rule, std::vector<std::string> aten = {}) {
    r.add(op, into_result_types(std::move(rule)), std::move(aten));
  };
  add("_fft_c2c", fft_c2c, {"_fft_c2c", "_fft_c2c.out"});
  add("_fft_r2c", fft_r2c, {"_fft_r2c", "_fft_r2c.out"});
  add("_fft_c2r", fft_c2r, {"_fft_c2r", "_fft_c2r.out"});
}

}  // namespace torchtpu::lowering
