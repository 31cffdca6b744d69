// Separable resampling: each output position along one dimension reads a few input positions with
// weights known when the program is built (interpolation, adaptive pooling windows, reflection and
// replication padding). Forward is a gather per tap, so a NaN reaches only the outputs that read
// it; the gradient is the transpose, a [out, in] matrix product.
#pragma once

#include <vector>

#include "lowering/helpers.h"

namespace torchtpu::lowering {

struct Taps {
  int64_t in_size = 0, out_size = 0, width = 0;  // `width` taps per output position
  std::vector<int64_t> index;                    // out_size * width; -1: no tap
  std::vector<double> weight;                    // out_size * width
  bool unit = false;                             // every weight is 1: no multiply

  Taps(int64_t in, int64_t out, int64_t w)
      : in_size(in), out_size(out), width(w), index(out * w, -1), weight(out * w, 0) {}
  void set(int64_t o, int64_t k, int64_t i, double w) {
    index[o * width + k] = i;
    weight[o * width + k] = w;
  }
};

// A rank-1 constant of `type`.
Value constant_vector(FunctionBuilder& b, ElementType type, const std::vector<double>& values);
// x's elements at positions `index` along `dim` (constant indices).
Value take(FunctionBuilder& b, const Value& x, int64_t dim, const std::vector<int64_t>& index);
// Along `dim`: out[o] = sum_k weight[o, k] * x[index[o, k]], summed in tap order.
Value resample(FunctionBuilder& b, const Value& x, int64_t dim, const Taps& taps);
// The gradient of `resample`: g [.., out_size, ..] -> [.., in_size, ..].
Value resample_transpose(FunctionBuilder& b, const Value& g, int64_t dim, const Taps& taps);

}  // namespace torchtpu::lowering
