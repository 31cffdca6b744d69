// Shorthands for the arithmetic that the neural-network rules (activations, losses, norms,
// distances) are written in: operands of one shape and type.
#pragma once

#include "lowering/helpers.h"

namespace torchtpu::lowering {

inline Value add(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.add", x, y);
}
inline Value sub(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.subtract", x, y);
}
inline Value mul(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.multiply", x, y);
}
inline Value divide(FunctionBuilder& b, const Value& x, const Value& y) {
  return binary(b, "stablehlo.divide", x, y);
}
// `value` in x's type and shape.
inline Value like(FunctionBuilder& b, const Value& x, double value) {
  return full(b, x.shape.type, x.shape.dims, value);
}
// The sum of every element of `x`, a 0-d value.
inline Value sum_all(FunctionBuilder& b, const Value& x) {
  Dims all;
  for (size_t d = 0; d < x.shape.rank(); ++d) all.push_back(static_cast<int64_t>(d));
  return reduce(b, x, all, constant(b, x.shape.type, 0), "stablehlo.add");
}

// The sum of `x` down to `dims`, the shape it was broadcast from (trailing dimensions align).
inline Value sum_to(FunctionBuilder& b, const Value& x, const Dims& dims) {
  size_t lead = x.shape.rank() - dims.size();
  Dims axes;
  for (size_t d = 0; d < x.shape.rank(); ++d) {
    if (d < lead || (dims[d - lead] == 1 && x.shape.dims[d] != 1)) {
      axes.push_back(static_cast<int64_t>(d));
    }
  }
  Value s = reduce(b, x, axes, constant(b, x.shape.type, 0), "stablehlo.add");
  return reshape(b, s, dims);
}

}  // namespace torchtpu::lowering
