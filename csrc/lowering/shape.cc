// Ops that rearrange or make elements: cat, flip, roll, padding, triangles, repeat, arange.
#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// cat(tensors, dim): PyTorch skips 1-D empty tensors ("legacy" shape [0]) among others.
Values cat(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Dims shape = out_shape(a);
  std::vector<Value> parts;
  for (const Value& x : v) {
    if (x.shape.rank() == 1 && x.shape.dims[0] == 0 && shape.size() != 1) continue;
    if (x.shape.numel() == 0) continue;
    parts.push_back(convert(b, x, t));
  }
  if (parts.empty()) return {full(b, t, shape, 0)};
  int64_t dim = normalize_dim(a.i("dim"), static_cast<int64_t>(shape.size()));
  return {concatenate(b, parts, dim)};
}

// tril / triu(self, diagonal)
LoweringRule triangle(bool lower) {
  return [lower](FunctionBuilder& b, const Values& v, const Attrs& a) {
    Value x = v[0];
    const Dims& d = x.shape.dims;
    size_t r = d.size();
    Value row = iota(b, ElementType::kS64, d, r - 2), col = iota(b, ElementType::kS64, d, r - 1);
    Value shifted = binary(b, "stablehlo.add", row,
                           full(b, ElementType::kS64, d, static_cast<double>(a.i("diagonal"))));
    Value keep = compare(b, col, shifted, lower ? "LE" : "GE");
    return Values{select(b, keep, x, full(b, x.shape.type, d, 0))};
  };
}

Values flip(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  Dims dims;
  for (int64_t d : a.ints("dims")) dims.push_back(normalize_dim(d, x.shape.rank()));
  if (dims.empty() || x.shape.rank() == 0) return {x};
  return {b.op("stablehlo.reverse", {x}, x.shape,
               "dimensions = " + FunctionBuilder::i64_array(dims))};
}

Value roll_dim(FunctionBuilder& b, const Value& x, int64_t dim, int64_t shift) {
  int64_t n = x.shape.dims[dim];
  if (n == 0) return x;
  shift = ((shift % n) + n) % n;
  if (shift == 0) return x;
  Dims start(x.shape.rank(), 0), limit = x.shape.dims;
  limit[dim] = n - shift;
  Value head = slice(b, x, start, limit);
  start[dim] = n - shift;
  limit[dim] = n;
  Value tail = slice(b, x, start, limit);
  return concatenate(b, {tail, head}, dim);
}

// roll(self, shifts, dims): with no dims, over the flattened tensor.
Values roll(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  const Dims& shifts = a.ints("shifts");
  Dims dims = a.has("dims") ? a.ints("dims") : Dims{};
  if (dims.empty()) {
    Value flat = roll_dim(b, reshape(b, x, {x.shape.numel()}), 0, shifts.at(0));
    return {reshape(b, flat, x.shape.dims)};
  }
  for (size_t k = 0; k < dims.size(); ++k) {
    x = roll_dim(b, x, normalize_dim(dims[k], x.shape.rank()), shifts.at(k));
  }
  return {x};
}

// constant_pad_nd(self, pad, value): pad pairs run from the last dimension backwards and may be
// negative (cropping).
Values constant_pad(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Value x = v[0];
  const Dims& pad = a.ints("pad");
  size_t r = x.shape.rank();
  Dims low(r, 0), high(r, 0), out = x.shape.dims;
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    size_t d = r - 1 - k;
    low[d] = pad[2 * k];
    high[d] = pad[2 * k + 1];
    out[d] += low[d] + high[d];
  }
  Value value = convert(b, v[1], x.shape.type);
  return {b.op("stablehlo.pad", {x, value}, Shape{x.shape.type, out},
               "edge_padding_low = " + FunctionBuilder::i64_array(low) + ", edge_padding_high = " +
                   FunctionBuilder::i64_array(high) + ", interior_padding = " +
                   FunctionBuilder::i64_array(Dims(r, 0)))};
}

// repeat(self, repeats): tile by broadcasting each dim against its repeat count.
Values repeat(FunctionBuilder& b, const Values& v, const Attrs& a) {
  const Dims& repeats = a.ints("repeats");
  Value x = v[0];
  Dims padded(repeats.size() - x.shape.rank(), 1);
  padded.insert(padded.end(), x.shape.dims.begin(), x.shape.dims.end());
  x = reshape(b, x, padded);
  Dims expanded, mapping;
  for (size_t d = 0; d < padded.size(); ++d) {
    expanded.push_back(repeats[d]);
    expanded.push_back(padded[d]);
    mapping.push_back(static_cast<int64_t>(2 * d + 1));
  }
  Value tiled = broadcast_in_dim(b, x, expanded, mapping);
  return {reshape(b, tiled, out_shape(a))};
}

// arange(start, end, step): start + i * step, computed in float64 (int64 for integers).
Values arange(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Dims shape = out_shape(a);
  bool floating = hlo::is_floating(t);
  ElementType c = floating ? ElementType::kF64 : ElementType::kS64;
  Value start = v.size() >= 2 ? convert(b, v[0], c) : constant(b, c, 0);
  Value step = v.size() >= 3 ? convert(b, v[2], c) : constant(b, c, 1);
  Value i = convert(b, iota(b, ElementType::kS64, shape, 0), c);
  Value r = binary(b, "stablehlo.add", broadcast_to(b, start, shape),
                   binary(b, "stablehlo.multiply", i, broadcast_to(b, step, shape)));
  return {convert(b, r, t)};
}

// linspace(start, end, steps): PyTorch's symmetric formula, exact at both ends.
Values linspace(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Dims shape = out_shape(a);
  int64_t steps = shape.empty() ? 1 : shape[0];
  ElementType c = hlo::is_complex(t) ? t : ElementType::kF64;
  // An integer linspace starts from the ends converted to the integer type (truncated), and
  // truncates each value, as the CPU does.
  bool integral = !hlo::is_floating(t) && !hlo::is_complex(t);
  Value start = convert(b, integral ? convert(b, v[0], t) : v[0], c);
  Value end = convert(b, integral ? convert(b, v[1], t) : v[1], c);
  if (steps <= 1) return {convert(b, broadcast_to(b, start, shape), t)};
  // (end - start) / (steps - 1); of complex values by Smith's division, as the CPU's kernel
  Value step = divide(b, binary(b, "stablehlo.subtract", end, start),
                      constant(b, c, static_cast<double>(steps - 1)));
  Value i = convert(b, iota(b, ElementType::kS64, shape, 0), c);
  Value from_start = binary(b, "stablehlo.add", broadcast_to(b, start, shape),
                            binary(b, "stablehlo.multiply", i, broadcast_to(b, step, shape)));
  Value back = binary(b, "stablehlo.subtract", full(b, c, shape, static_cast<double>(steps - 1)), i);
  Value from_end = binary(b, "stablehlo.subtract", broadcast_to(b, end, shape),
                          binary(b, "stablehlo.multiply", back, broadcast_to(b, step, shape)));
  Value first_half = compare(b, iota(b, ElementType::kS64, shape, 0),
                             full(b, ElementType::kS64, shape, static_cast<double>(steps / 2)),
                             "LT");
  Value r = select(b, first_half, from_start, from_end);
  return {convert(b, r, t)};
}

// Complex logspace as PyTorch's kernel: linspace's exponents in the output type, and base **
// exponent as its complex pow. A single step is base ** start in complex128, through the polar
// form where base > 0.
Value complex_logspace(FunctionBuilder& b, const Values& v, ElementType t, const Dims& shape) {
  int64_t steps = shape[0];
  if (steps == 1) {
    constexpr ElementType c128 = ElementType::kC128, f64 = ElementType::kF64;
    Value base = convert(b, v[2], f64), start = convert(b, v[0], c128);
    auto [re, im] = real_and_imag(b, start);
    Value magnitude = binary(b, "stablehlo.power", base, re);
    Value angle = binary(b, "stablehlo.multiply", im, unary(b, "stablehlo.log", base));
    Value polar = make_complex(b,
                               binary(b, "stablehlo.multiply", magnitude,
                                      unary(b, "stablehlo.cosine", angle)),
                               binary(b, "stablehlo.multiply", magnitude,
                                      unary(b, "stablehlo.sine", angle)),
                               c128);
    Value positive = compare(b, base, constant(b, f64, 0), "GT");
    Value r = select(b, positive, polar, tensor_power(b, convert(b, base, c128), start));
    return convert(b, broadcast_to(b, r, shape), t);
  }
  Value exponent = linspace(b, {v[0], v[1]}, Attrs().set_type("type", t).set("shape", shape))[0];
  return tensor_power(b, splat(b, v[2], t, shape), exponent);
}

// logspace(start, end, steps, base): base to the power of linspace's exponents, in float64 from
// start and end in the output type, as PyTorch's kernel.
Values logspace(FunctionBuilder& b, const Values& v, const Attrs& a) {
  ElementType t = out_type(a);
  Dims shape = out_shape(a);
  if (hlo::is_complex(t)) {
    if (shape.empty() || shape[0] == 0) return {full(b, t, shape, 0)};
    return {complex_logspace(b, v, t, shape)};
  }
  Values ends{convert(b, convert(b, v[0], t), ElementType::kF64),
              convert(b, convert(b, v[1], t), ElementType::kF64)};
  Value exponent =
      linspace(b, ends, Attrs().set_type("type", ElementType::kF64).set("shape", shape))[0];
  Value base = splat(b, v[2], ElementType::kF64, shape);
  return {convert(b, binary(b, "stablehlo.power", base, exponent), t)};
}

// eye(n, m): ones on the diagonal.
Values eye(FunctionBuilder& b, const Values&, const Attrs& a) {
  Dims shape = out_shape(a);
  Value diagonal = compare(b, iota(b, ElementType::kS64, shape, 0),
                           iota(b, ElementType::kS64, shape, 1), "EQ");
  return {convert(b, diagonal, out_type(a))};
}

}  // namespace

void register_shape_rules(Registry& r) {
  r.add("linspace", linspace, {"linspace.out"});
  r.add("logspace", logspace, {"logspace.out"});
  r.add("eye", eye, {"eye.out", "eye.m_out"});
  r.add("cat", cat, {"cat", "cat.out"});
  r.add("tril", triangle(true), {"tril", "tril.out", "tril_"});
  r.add("triu", triangle(false), {"triu", "triu.out", "triu_"});
  r.add("flip", flip, {"flip", "flip.out"});
  r.add("roll", roll, {"roll", "roll.out"});
  r.add("constant_pad_nd", constant_pad, {"constant_pad_nd", "constant_pad_nd.out"});
  r.add("repeat", repeat, {"repeat", "repeat.out"});
  r.add("arange", arange, {"arange.start_out", "arange.out"});
}

}  // namespace torchtpu::lowering
