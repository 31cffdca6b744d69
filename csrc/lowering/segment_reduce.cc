// segment_reduce (sum, mean, max, min, prod over ragged segments of one axis, given by `lengths`
// or `offsets`) and its gradient. Each element's segment is counted from the segments' ends (a
// scatter of ones and a prefix sum), so the cost is linear in the data; the reduction is a scatter
// of the elements into one row per segment, starting from `initial`, in element order as the CPU
// adds them. Elements outside every segment (before offsets[0], after the last end) go to a spare
// row that is dropped. Negative lengths and lengths that do not sum to the axis are device-side
// checks (aten/value_checks.cc).
#include <cmath>
#include <limits>

#include "lowering/arith.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

const ElementType kIndex = ElementType::kS64;

enum class Reduce { kSum, kMean, kMax, kMin, kProd };

Reduce reduction(const std::string& name) {
  if (name == "sum") return Reduce::kSum;
  if (name == "mean") return Reduce::kMean;
  if (name == "max") return Reduce::kMax;
  if (name == "min") return Reduce::kMin;
  if (name == "prod") return Reduce::kProd;
  throw std::runtime_error("reduce argument must be either sum, prod, mean, amax or amin, got " +
                           name);
}

// The data as [outer * N, inner] rows around `axis`, and where each row goes: its segment's row
// in [outer * (S + 1), inner] (segment S of each outer index is the spare one).
struct Segments {
  int64_t outer = 1, n = 0, inner = 1, count = 0;  // count: S
  Value lengths;   // [outer * (S + 1)] s64, the spare row's length 1 (no division by 0)
  Value target;    // [outer * N] s64
  Value in_segment;  // [outer * N, inner] pred
  Dims rows() const { return {outer * (count + 1), inner}; }  // the segments' rows
};

Segments segments(FunctionBuilder& b, const Shape& data, const Value* lengths,
                  const Value* offsets, int64_t axis) {
  const Value& given = lengths != nullptr ? *lengths : *offsets;
  int64_t rank = static_cast<int64_t>(data.rank());
  axis = normalize_dim(axis, rank);
  if (axis != static_cast<int64_t>(given.shape.rank()) - 1) {
    throw std::runtime_error(std::string("segment_reduce(): Expected axis to be the last ") +
                             "dimension of " + (lengths != nullptr ? "lengths" : "offsets") +
                             " but got " + std::to_string(axis) + ".");
  }
  Segments s;
  for (int64_t d = 0; d < axis; ++d) {
    if (given.shape.dims[d] != data.dims[d]) {
      throw Unsupported("torchtpu: segment_reduce with lengths/offsets whose leading dimensions "
                        "differ from the data's is not lowered");
    }
    s.outer *= data.dims[d];
  }
  for (int64_t d = axis + 1; d < rank; ++d) s.inner *= data.dims[d];
  s.n = data.dims[axis];
  int64_t o = s.outer, n = s.n;
  Value g = reshape(b, convert(b, given, kIndex), {o, given.shape.dims[axis]});
  Value start, ends, len;
  if (lengths != nullptr) {
    s.count = given.shape.dims[axis];
    start = full(b, kIndex, {o, 1}, 0);
    len = g;
    ends = prefix_sum(b, g, 1);
  } else {
    s.count = given.shape.dims[axis] - 1;
    start = slice(b, g, {0, 0}, {o, 1});
    ends = slice(b, g, {0, 1}, {o, s.count + 1});
    len = sub(b, ends, slice(b, g, {0, 0}, {o, s.count}));
  }
  int64_t k = s.count;
  // Element j's segment: how many segments end at or before it.
  Value clamped = minimum(b, maximum(b, ends, full(b, kIndex, {o, k}, 0)),
                          full(b, kIndex, {o, k}, static_cast<double>(n)));
  Value slot = add(b, clamped, mul(b, iota(b, kIndex, {o, k}, 0), full(b, kIndex, {o, k}, n + 1)));
  Value marks = scatter_rows(b, full(b, kIndex, {o * (n + 1), 1}, 0), reshape(b, slot, {o * k}),
                             full(b, kIndex, {o * k, 1}, 1), "stablehlo.add");
  Value seg = slice(b, prefix_sum(b, reshape(b, marks, {o, n + 1}), 1), {0, 0}, {o, n});
  Value position = iota(b, kIndex, {o, n}, 1);
  Value first = broadcast_in_dim(b, reshape(b, start, {o}), {o, n}, {0});
  Value inside = b_and(b, compare(b, position, first, "GE"),
                       compare(b, seg, full(b, kIndex, {o, n}, static_cast<double>(k)), "LT"));
  seg = select(b, inside, seg, full(b, kIndex, {o, n}, static_cast<double>(k)));
  seg = add(b, seg, mul(b, iota(b, kIndex, {o, n}, 0), full(b, kIndex, {o, n}, k + 1)));
  s.target = reshape(b, seg, {o * n});
  s.in_segment = broadcast_in_dim(b, reshape(b, inside, {o * n}), {o * n, s.inner}, {0});
  s.lengths = reshape(b, concatenate(b, {len, full(b, kIndex, {o, 1}, 1)}, 1), {o * (k + 1)});
  return s;
}

// Segment rows [outer * (S + 1), inner] without the spare ones, as `shape`.
Value drop_spare(FunctionBuilder& b, const Segments& s, const Value& rows, const Dims& shape) {
  Value r = reshape(b, rows, {s.outer, s.count + 1, s.inner});
  return reshape(b, slice(b, r, {0, 0, 0}, {s.outer, s.count, s.inner}), shape);
}

// Output rows [outer * S, inner] with a zero spare row after each outer index's segments.
Value with_spare(FunctionBuilder& b, const Segments& s, const Value& out) {
  Value r = reshape(b, out, {s.outer, s.count, s.inner});
  Value spare = full(b, out.shape.type, {s.outer, 1, s.inner}, 0);
  return reshape(b, concatenate(b, {r, spare}, 1), {s.outer * (s.count + 1), s.inner});
}

// The operands after `first`, in schema order: lengths, [indices,] offsets, initial.
struct Optionals {
  const Value *lengths = nullptr, *offsets = nullptr, *initial = nullptr;
};
Optionals optionals(const Values& v, const Attrs& a, size_t first, bool with_indices) {
  Optionals o;
  size_t i = first;
  if (!a.has("lengths_absent")) o.lengths = &v[i++];
  if (with_indices && !a.has("indices_absent")) {
    throw std::runtime_error("segment_reduce(): indices based reduction is not supported yet.");
  }
  if (!a.has("offsets_absent")) o.offsets = &v[i++];
  if (!a.has("initial_absent")) o.initial = &v[i++];
  if (o.lengths == nullptr && o.offsets == nullptr) {
    throw std::runtime_error("segment_reduce(): Either lengths or offsets must be defined.");
  }
  return o;
}

// The CPU kernels' dtype checks: integer lengths/offsets, floating data.
void check_types(ElementType data, const Optionals& o) {
  ElementType index = (o.lengths != nullptr ? o.lengths : o.offsets)->shape.type;
  if (index != ElementType::kS32 && index != kIndex) {
    std::string kernel = o.lengths != nullptr ? "lengths" : "offsets";
    throw Refused("\"_segment_reduce_" + kernel + "_cpu_kernel1\" not implemented for '" +
                  scalar_type_name(index) + "'");
  }
  if (!hlo::is_floating(data)) {
    throw Refused(std::string("\"_segment_reduce_cpu\" not implemented for '") +
                  scalar_type_name(data) + "'");
  }
}

// What both rules start from: the types, the reduction, the optional operands, the segments of
// the data (operand `data`).
struct Call {
  ElementType type, compute;
  Reduce reduce;
  Optionals opt;
  Segments s;
};
Call prepare(FunctionBuilder& b, const Values& v, const Attrs& a, size_t data, bool forward) {
  ElementType t = out_type(a);
  Reduce r = reduction(a.s("reduce"));
  Optionals opt = optionals(v, a, forward ? 1 : 3, forward);
  check_types(t, opt);
  Segments s = segments(b, v[data].shape, opt.lengths, opt.offsets, a.i("axis"));
  return {t, opmath(t), r, opt, s};
}

// Each segment's starting value: `initial`, else the reduction's identity.
Value initial_rows(FunctionBuilder& b, const Call& k) {
  Dims rows = k.s.rows();
  if (k.opt.initial != nullptr) return splat(b, *k.opt.initial, k.compute, rows);
  if (k.reduce == Reduce::kMax || k.reduce == Reduce::kMin) {
    return broadcast_to(b, extreme(b, k.compute, k.reduce == Reduce::kMin), rows);
  }
  return full(b, k.compute, rows, k.reduce == Reduce::kProd ? 1 : 0);
}

// segment_reduce(data, reduce, *, lengths?, indices?, offsets?, axis, unsafe, initial?)
Values segment_reduce(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Call k = prepare(b, v, a, 0, true);
  const Segments& s = k.s;
  ElementType c = k.compute;
  Dims rows = s.rows();
  static const char* const kOps[] = {"stablehlo.add", "stablehlo.add", "max", "min",
                                     "stablehlo.multiply"};
  Value x = reshape(b, convert(b, v[0], c), {s.outer * s.n, s.inner});
  Value out = scatter_rows(b, initial_rows(b, k), s.target, x, kOps[static_cast<int>(k.reduce)]);
  if (k.reduce == Reduce::kMean) {
    Value len = broadcast_in_dim(b, s.lengths, rows, {0});
    Value empty = compare(b, len, full(b, kIndex, rows, 0), "EQ");
    Value mean = divide(b, out, convert(b, select(b, empty, full(b, kIndex, rows, 1), len), c));
    Value none = k.opt.initial != nullptr ? out : like(b, out, std::nan(""));
    out = select(b, empty, none, mean);
  }
  return {convert(b, drop_spare(b, s, out, out_shape(a)), k.type)};
}

// At each element, how many elements of its segment have `flags` set, in type `c`.
Value count_in_segment(FunctionBuilder& b, const Segments& s, const Value& flags, ElementType c) {
  Value n = scatter_rows(b, full(b, c, s.rows(), 0), s.target, convert(b, flags, c),
                         "stablehlo.add");
  return gather_rows(b, n, s.target);
}

// The gradient of prod at the elements that are 0 or NaN, where out / x does not give it: the
// product of the segment's other elements (with `initial`).
Value product_of_others(FunctionBuilder& b, const Segments& s, const Value& x, const Value& special,
                        const Value& is_nan_x, const Value& start) {
  ElementType c = x.shape.type;
  Value regular = scatter_rows(b, start, s.target, select(b, special, like(b, x, 1), x),
                               "stablehlo.multiply");
  Value zero = b_and(b, special, unary(b, "stablehlo.not", is_nan_x));
  auto others = [&](const Value& flags) {
    Value n = sub(b, count_in_segment(b, s, flags, c), convert(b, flags, c));
    return compare(b, n, like(b, x, 0), "GT");
  };
  Value other_nans = others(is_nan_x), other_zeros = others(zero);
  Value p = gather_rows(b, regular, s.target);
  p = select(b, other_zeros, mul(b, p, like(b, x, 0)), p);
  return select(b, other_nans, like(b, x, std::nan("")), p);
}

// _segment_reduce_backward(grad, output, data, reduce, *, lengths?, offsets?, axis, initial?)
Values segment_reduce_backward(FunctionBuilder& b, const Values& v, const Attrs& a) {
  Call k = prepare(b, v, a, 2, false);
  const Segments& s = k.s;
  ElementType c = k.compute;
  Reduce r = k.reduce;
  Dims dims{s.outer * s.n, s.inner};
  Value g = gather_rows(b, with_spare(b, s, convert(b, v[0], c)), s.target);
  Value x = reshape(b, convert(b, v[2], c), dims);
  Value result;
  if (r == Reduce::kSum) {
    result = g;
  } else if (r == Reduce::kMean) {
    Value len = gather_rows(b, reshape(b, s.lengths, {s.lengths.shape.dims[0], 1}), s.target);
    len = broadcast_in_dim(b, len, dims, {0, 1});
    result = divide(b, g, convert(b, len, c));
  } else {
    Value out = gather_rows(b, with_spare(b, s, convert(b, v[1], c)), s.target);
    Value nan = is_nan(b, x);
    if (r == Reduce::kProd) {
      Value special = b_or(b, nan, compare(b, x, like(b, x, 0), "EQ"));
      Value others = product_of_others(b, s, x, special, nan, initial_rows(b, k));
      result = select(b, special, mul(b, g, others), divide(b, mul(b, g, out), x));
    } else {
      // Every element equal to the extreme (or NaN) shares it; as on the CPU, only a positive
      // share is divided among them.
      Value hit = b_and(b, s.in_segment, b_or(b, nan, compare(b, x, out, "EQ")));
      Value hits = count_in_segment(b, s, hit, c);
      Value share = select(b, hit, g, like(b, g, 0));
      Value split = b_and(b, compare(b, hits, like(b, hits, 2), "GE"),
                          compare(b, share, like(b, share, 0), "GT"));
      result = select(b, split, divide(b, share, hits), share);
    }
  }
  result = select(b, s.in_segment, result, like(b, result, 0));
  return {convert(b, reshape(b, result, out_shape(a)), k.type)};
}

}  // namespace

void register_segment_reduce_rules(Registry& r) {
  r.add("segment_reduce", segment_reduce, {"segment_reduce", "segment_reduce.out"});
  r.add("segment_reduce_backward", segment_reduce_backward,
        {"_segment_reduce_backward", "_segment_reduce_backward.out"});
}

}  // namespace torchtpu::lowering
