// Reflection and replication padding of the trailing 1-3 dims, and their gradients: each output
// element copies one input element (a constant index map per dimension). PyTorch's meta functions
// have already refused pads larger than the input.
#include <algorithm>

#include "lowering/registry.h"
#include "lowering/resample.h"

namespace torchtpu::lowering {
namespace {

// The input element output position `o` copies along a dimension of `size` padded by `low`.
Taps pad_taps(int64_t size, int64_t out, int64_t low, bool reflect) {
  Taps taps(size, out, 1);
  taps.unit = true;
  for (int64_t o = 0; o < out; ++o) {
    int64_t p = o - low;
    if (reflect) {
      if (p < 0) p = -p;
      if (p >= size) p = 2 * (size - 1) - p;
    } else {
      p = std::min(std::max<int64_t>(p, 0), size - 1);
    }
    taps.set(o, 0, p, 1);
  }
  return taps;
}

// The padding list runs from the last dimension: (left, right, top, bottom, front, back).
int64_t low_pad(const Attrs& a, size_t d, size_t n) { return a.ints("padding")[2 * (n - 1 - d)]; }

// reflection_padNd / replication_padNd(self, padding)
LoweringRule pad(size_t n, bool reflect) {
  return [n, reflect](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = v[0];
    Dims out = out_shape(a);
    size_t lead = out.size() - n;
    for (size_t d = 0; d < n; ++d) {
      int64_t dim = static_cast<int64_t>(lead + d);
      x = resample(b, x, dim, pad_taps(x.shape.dims[dim], out[dim], low_pad(a, d, n), reflect));
    }
    return Values{convert(b, x, out_type(a))};
  };
}

// reflection_padNd_backward / replication_padNd_backward(grad_output, self, padding)
LoweringRule pad_backward(size_t n, bool reflect) {
  return [n, reflect](FunctionBuilder& b, const Values& v, const Attrs& a) {
    ElementType t = out_type(a);
    Value g = convert(b, v[0], hlo::is_complex(t) ? t : opmath(t));
    Dims in = out_shape(a);
    size_t lead = in.size() - n;
    for (size_t d = 0; d < n; ++d) {
      int64_t dim = static_cast<int64_t>(lead + d);
      g = resample_transpose(b, g, dim,
                             pad_taps(in[dim], g.shape.dims[dim], low_pad(a, d, n), reflect));
    }
    return Values{convert(b, g, t)};
  };
}

}  // namespace

void register_padding_rules(Registry& r) {
  for (size_t n = 1; n <= 3; ++n) {
    for (bool reflect : {true, false}) {
      std::string name = (reflect ? "reflection_pad" : "replication_pad") + std::to_string(n) + "d";
      r.add(name, pad(n, reflect), {name, name + ".out"});
      r.add(name + "_backward", pad_backward(n, reflect),
            {name + "_backward", name + "_backward.grad_input"});
    }
  }
}

}  // namespace torchtpu::lowering
