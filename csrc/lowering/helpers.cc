#include "lowering/helpers.h"

#include <algorithm>
#include <functional>
#include <variant>

#include <limits>
#include <stdexcept>
#include <numeric>

#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// Complex values have no order: a rule that orders them does not lower, and the op runs on the
// CPU, which says what it says of them.
void require_order(ElementType type) {
  if (hlo::is_complex(type)) throw Unsupported("complex values have no order");
}

std::string comparison_type(ElementType type) {
  if (hlo::is_floating(type) || hlo::is_complex(type)) return "FLOAT";
  if (hlo::is_signed_integer(type)) return "SIGNED";
  return "UNSIGNED";
}

}  // namespace

Value convert(FunctionBuilder& b, const Value& v, ElementType type) {
  if (v.shape.type == type) return v;
  Shape out{type, v.shape.dims};
  if (type == ElementType::kPred) {
    return compare(b, v, full(b, v.shape.type, v.shape.dims, 0), "NE");
  }
  if (hlo::is_complex(v.shape.type) && !hlo::is_complex(type)) {
    ElementType part = real_part(v.shape.type);
    Value re = b.op("stablehlo.real", {v}, Shape{part, v.shape.dims});
    return convert(b, re, type);
  }
  // PyTorch casts floating values to uint8 through int64 on every device (c10's
  // static_cast_with_inter_type), so -1.0 is 255 and 300.0 is 44, where a direct conversion
  // would clamp them.
  if (type == ElementType::kU8 && hlo::is_floating(v.shape.type)) {
    return convert(b, convert(b, v, ElementType::kS64), type);
  }
  return b.op("stablehlo.convert", {v}, out);
}

Value reshape(FunctionBuilder& b, const Value& v, const Dims& dims) {
  if (v.shape.dims == dims) return v;
  return b.op("stablehlo.reshape", {v}, Shape{v.shape.type, dims});
}

Value broadcast_in_dim(FunctionBuilder& b, const Value& v, const Dims& dims,
                       const Dims& broadcast_dimensions) {
  return b.op("stablehlo.broadcast_in_dim", {v}, Shape{v.shape.type, dims},
              "broadcast_dimensions = " + FunctionBuilder::i64_array(broadcast_dimensions));
}

Value broadcast_to(FunctionBuilder& b, const Value& v, const Dims& dims) {
  if (v.shape.dims == dims) return v;
  Dims mapping(v.shape.rank());
  std::iota(mapping.begin(), mapping.end(), static_cast<int64_t>(dims.size() - v.shape.rank()));
  return broadcast_in_dim(b, v, dims, mapping);
}

Value slice(FunctionBuilder& b, const Value& v, const Dims& start, const Dims& limit) {
  Dims out(start.size());
  bool whole = true;
  for (size_t i = 0; i < start.size(); ++i) {
    out[i] = limit[i] - start[i];
    whole = whole && start[i] == 0 && limit[i] == v.shape.dims[i];
  }
  if (whole) return v;
  return b.op("stablehlo.slice", {v}, Shape{v.shape.type, out},
              "start_indices = " + FunctionBuilder::i64_array(start) +
                  ", limit_indices = " + FunctionBuilder::i64_array(limit) +
                  ", strides = " + FunctionBuilder::i64_array(Dims(start.size(), 1)));
}

Value transpose(FunctionBuilder& b, const Value& v, const Dims& permutation) {
  bool identity = true;
  Dims out(permutation.size());
  for (size_t i = 0; i < permutation.size(); ++i) {
    out[i] = v.shape.dims[permutation[i]];
    identity = identity && permutation[i] == static_cast<int64_t>(i);
  }
  if (identity) return v;
  return b.op("stablehlo.transpose", {v}, Shape{v.shape.type, out},
              "permutation = " + FunctionBuilder::i64_array(permutation));
}

Value modulus(FunctionBuilder& b, const Value& x) {
  if (!hlo::is_complex(x.shape.type)) return unary(b, "stablehlo.abs", x);
  ElementType part = real_part(x.shape.type);
  Value m = b.op("stablehlo.abs", {x}, Shape{part, x.shape.dims});
  // hypot's rules, which the CPU plugin's complex abs breaks (|1 + NaN i| was sqrt(2), |NaN i|
  // 0, |NaN + inf i| NaN): an infinite part makes it inf, else a NaN part NaN.
  auto [re, im] = real_and_imag(b, x);
  Value inf = broadcast_in_dim(b, extreme(b, part, true), x.shape.dims, {});
  Value infinite = b_or(b, compare(b, unary(b, "stablehlo.abs", re), inf, "EQ"),
                        compare(b, unary(b, "stablehlo.abs", im), inf, "EQ"));
  Value nan = b_or(b, is_nan(b, re), is_nan(b, im));
  return select(b, infinite, inf, select(b, nan, binary(b, "stablehlo.add", re, im), m));
}

Value pad_end(FunctionBuilder& b, const Value& v, int64_t count) {
  return pad_high(b, v, {count});
}

Value pad_high(FunctionBuilder& b, const Value& v, const Dims& high, double value) {
  Dims dims = v.shape.dims;
  bool any = false;
  for (size_t k = 0; k < dims.size(); ++k) {
    dims[k] += high[k];
    any |= high[k] != 0;
  }
  if (!any) return v;
  Dims zeros(dims.size(), 0);
  return b.op("stablehlo.pad", {v, constant(b, v.shape.type, value)}, Shape{v.shape.type, dims},
              "edge_padding_low = " + FunctionBuilder::i64_array(zeros) +
                  ", edge_padding_high = " + FunctionBuilder::i64_array(high) +
                  ", interior_padding = " + FunctionBuilder::i64_array(zeros));
}

Value concatenate(FunctionBuilder& b, const std::vector<Value>& values, int64_t dim) {
  if (values.size() == 1) return values[0];
  Dims out = values[0].shape.dims;
  out[dim] = 0;
  for (const Value& v : values) out[dim] += v.shape.dims[dim];
  return b.op("stablehlo.concatenate", values, Shape{values[0].shape.type, out},
              "dimension = " + std::to_string(dim) + " : i64");
}

Value iota(FunctionBuilder& b, ElementType type, const Dims& dims, int64_t dim) {
  return b.op("stablehlo.iota", {}, Shape{type, dims},
              "iota_dimension = " + std::to_string(dim) + " : i64");
}

Value constant(FunctionBuilder& b, ElementType type, double value) {
  if (hlo::is_complex(type)) {
    ElementType part = real_part(type);
    return convert(b, constant(b, part, value), type);
  }
  return b.constant(Shape{type, {}}, FunctionBuilder::scalar_literal(type, value));
}

Value full(FunctionBuilder& b, ElementType type, const Dims& dims, double value) {
  return broadcast_in_dim(b, constant(b, type, value), dims, {});
}

Value unary(FunctionBuilder& b, const std::string& op, const Value& x) {
  // StableHLO's abs and sign take signed types only: an unsigned value is its own magnitude, and
  // its sign is whether it is nonzero.
  if (hlo::is_unsigned_integer(x.shape.type) && op == "stablehlo.abs") return x;
  if (hlo::is_unsigned_integer(x.shape.type) && op == "stablehlo.sign") {
    return convert(b, compare(b, x, full(b, x.shape.type, x.shape.dims, 0), "NE"), x.shape.type);
  }
  return b.op(op, {x}, x.shape);
}

Value binary(FunctionBuilder& b, const std::string& op, const Value& x, const Value& y) {
  return b.op(op, {x, y}, x.shape);
}

Value compare(FunctionBuilder& b, const Value& x, const Value& y, const std::string& direction) {
  if (direction != "EQ" && direction != "NE") require_order(x.shape.type);
  return b.op("stablehlo.compare", {x, y}, Shape{ElementType::kPred, x.shape.dims},
              "comparison_direction = #stablehlo<comparison_direction " + direction +
                  ">, compare_type = #stablehlo<comparison_type " +
                  comparison_type(x.shape.type) + ">");
}

Value select(FunctionBuilder& b, const Value& pred, const Value& on_true, const Value& on_false) {
  return b.op("stablehlo.select", {pred, on_true, on_false}, on_true.shape);
}

bool is_dense(const Dims& sizes, const Dims& strides) {
  int64_t expected = 1;
  for (size_t k = sizes.size(); k-- > 0;) {
    if (sizes[k] == 1) continue;
    if (strides[k] != expected) return false;
    expected *= sizes[k];
  }
  return true;
}

Value promote(FunctionBuilder& b, const Value& v, ElementType type, const Dims& dims) {
  return broadcast_to(b, convert(b, v, type), dims);
}

}  // namespace torchtpu::lowering

namespace torchtpu::lowering {

ElementType real_part(ElementType type) {
  if (!hlo::is_complex(type)) return type;
  return type == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64;
}

ElementType opmath(ElementType type) {
  return type == ElementType::kF16 || type == ElementType::kBF16 ? ElementType::kF32 : type;
}

ElementType out_type(const Attrs& attrs, int k) {
  return attrs.type(k == 0 ? "type" : "type" + std::to_string(k));
}

Dims out_shape(const Attrs& attrs, int k) {
  return attrs.ints(k == 0 ? "shape" : "shape" + std::to_string(k));
}

ElementType compute_type(const Attrs& attrs) {
  return attrs.has("compute_type") ? attrs.type("compute_type") : attrs.type("type");
}

int64_t normalize_dim(int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  return dim < 0 ? dim + r : dim;
}

Dims reduction_dims(const Attrs& attrs, const std::string& key, int64_t rank) {
  Dims dims;
  if (attrs.has(key)) {
    try {
      dims = attrs.ints(key);
    } catch (const std::bad_variant_access&) {
      dims = {attrs.i(key)};
    }
  }
  if (dims.empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t& d : dims) d = normalize_dim(d, rank);
  if (rank == 0) dims.clear();  // a 0-d tensor reduces over nothing
  return dims;
}

namespace {

using Combiner = std::function<Value(FunctionBuilder&, const Value&, const Value&)>;

// stablehlo.reduce of `x` over `dims`, combining two scalars with `combine`.
Value reduce_with(FunctionBuilder& b, const Value& x, const Dims& dims, const Value& init,
                  const Combiner& combine) {
  if (dims.empty()) return x;
  Dims out;
  for (size_t d = 0; d < x.shape.dims.size(); ++d) {
    if (std::find(dims.begin(), dims.end(), static_cast<int64_t>(d)) == dims.end()) {
      out.push_back(x.shape.dims[d]);
    }
  }
  Shape scalar{x.shape.type, {}};
  return b.op_with_region(
      "stablehlo.reduce", {x, init}, {Shape{x.shape.type, out}}, {scalar, scalar},
      [combine](FunctionBuilder& r, const std::vector<Value>& args) {
        return std::vector<Value>{combine(r, args[0], args[1])};
      },
      "dimensions = " + FunctionBuilder::i64_array(dims))[0];
}

// max or min of two values of one shape; for floats a NaN wins whichever side it is on.
Value extreme_of(FunctionBuilder& b, const Value& x, const Value& y, bool largest) {
  require_order(x.shape.type);
  Value r = binary(b, largest ? "stablehlo.maximum" : "stablehlo.minimum", x, y);
  if (!hlo::is_floating(x.shape.type)) return r;
  return select(b, compare(b, x, x, "NE"), x, select(b, compare(b, y, y, "NE"), y, r));
}

}  // namespace

Value reduce(FunctionBuilder& b, const Value& x, const Dims& dims, const Value& init,
             const std::string& op) {
  return reduce_with(b, x, dims, init, [op](FunctionBuilder& r, const Value& p, const Value& q) {
    return binary(r, op, p, q);
  });
}

Value maximum(FunctionBuilder& b, const Value& x, const Value& y) {
  return extreme_of(b, x, y, true);
}

Value minimum(FunctionBuilder& b, const Value& x, const Value& y) {
  return extreme_of(b, x, y, false);
}

Value reduce_extreme(FunctionBuilder& b, const Value& x, const Dims& dims, bool largest) {
  return reduce_with(b, x, dims, extreme(b, x.shape.type, !largest),
                     [largest](FunctionBuilder& r, const Value& p, const Value& q) {
                       return extreme_of(r, p, q, largest);
                     });
}

Value scatter(FunctionBuilder& b, const Value& base, const Value& indices, const Value& updates,
              bool add, const std::string& dimension_numbers) {
  Shape scalar{base.shape.type, {}};
  return b.op_with_region(
      "stablehlo.scatter", {base, indices, updates}, {base.shape}, {scalar, scalar},
      [add, scalar](FunctionBuilder& r, const std::vector<Value>& args) {
        return std::vector<Value>{add ? r.op("stablehlo.add", {args[0], args[1]}, scalar)
                                      : args[1]};
      },
      dimension_numbers + ", indices_are_sorted = false, unique_indices = false")[0];
}

Value gather_rows(FunctionBuilder& b, const Value& table, const Value& index) {
  int64_t n = index.shape.dims[0], d = table.shape.dims[1];
  return b.op("stablehlo.gather", {table, reshape(b, index, {n, 1})},
              Shape{table.shape.type, {n, d}},
              "dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = "
              "[0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = " +
                  FunctionBuilder::i64_array({1, d}) + ", indices_are_sorted = false");
}

Value scatter_rows(FunctionBuilder& b, const Value& base, const Value& index, const Value& updates,
                   const std::string& op) {
  int64_t n = index.shape.dims[0];
  Shape scalar{base.shape.type, {}};
  return b.op_with_region(
      "stablehlo.scatter", {base, reshape(b, index, {n, 1}), updates}, {base.shape},
      {scalar, scalar},
      [op, scalar](FunctionBuilder& r, const std::vector<Value>& args) {
        if (op == "max") return std::vector<Value>{maximum(r, args[0], args[1])};
        if (op == "min") return std::vector<Value>{minimum(r, args[0], args[1])};
        return std::vector<Value>{r.op(op, {args[0], args[1]}, scalar)};
      },
      "scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], "
      "inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, "
      "indices_are_sorted = false, unique_indices = false")[0];
}

Value prefix_sum(FunctionBuilder& b, const Value& x, int64_t axis) {
  if (x.shape.dims[axis] == 0) return x;  // a window of no elements is not a valid program
  size_t rank = x.shape.rank();
  Dims window(rank, 1), strides(rank, 1);
  window[axis] = x.shape.dims[axis];
  std::vector<std::pair<int64_t, int64_t>> pads(rank, {0, 0});
  pads[axis].first = x.shape.dims[axis] - 1;
  std::string pad_text = FunctionBuilder::padding(pads);
  ElementType c = x.shape.type;
  Shape scalar{c, {}};
  return b.op_with_region(
      "stablehlo.reduce_window", {x, constant(b, c, 0)}, {x.shape}, {scalar, scalar},
      [scalar](FunctionBuilder& r, const std::vector<Value>& args) {
        return std::vector<Value>{r.op("stablehlo.add", {args[0], args[1]}, scalar)};
      },
      "window_dimensions = " + FunctionBuilder::i64_array(window) +
          ", window_strides = " + FunctionBuilder::i64_array(strides) + ", padding = " + pad_text)[0];
}

Value keep_dims(FunctionBuilder& b, const Value& reduced, const Dims& full_rank_dims,
                const Dims& reduced_axes) {
  Dims kept = full_rank_dims;
  for (int64_t d : reduced_axes) kept[d] = 1;
  return reshape(b, reduced, kept);
}

Value splat(FunctionBuilder& b, const Value& scalar, ElementType type, const Dims& dims) {
  return broadcast_to(b, convert(b, scalar, type), dims);
}

Value extreme(FunctionBuilder& b, ElementType type, bool largest) {
  if (hlo::is_floating(type)) {
    return constant(b, type, largest ? std::numeric_limits<double>::infinity()
                                     : -std::numeric_limits<double>::infinity());
  }
  std::string literal;
  switch (type) {
    case ElementType::kPred: literal = largest ? "true" : "false"; break;
    case ElementType::kS8: literal = largest ? "127" : "-128"; break;
    case ElementType::kS16: literal = largest ? "32767" : "-32768"; break;
    case ElementType::kS32: literal = largest ? "2147483647" : "-2147483648"; break;
    case ElementType::kS64:
      literal = largest ? "9223372036854775807" : "-9223372036854775808";
      break;
    case ElementType::kU8: literal = largest ? "255" : "0"; break;
    case ElementType::kU16: literal = largest ? "65535" : "0"; break;
    case ElementType::kU32: literal = largest ? "4294967295" : "0"; break;
    case ElementType::kU64: literal = largest ? "18446744073709551615" : "0"; break;
    default:
      require_order(type);
      throw std::invalid_argument("no extreme value for this type");
  }
  return b.constant(Shape{type, {}}, literal);
}

}  // namespace torchtpu::lowering

namespace torchtpu::lowering {

Value is_nan(FunctionBuilder& b, const Value& x) { return compare(b, x, x, "NE"); }

Value bitcast(FunctionBuilder& b, const Value& x, ElementType type) {
  return b.op("stablehlo.bitcast_convert", {x}, Shape{type, x.shape.dims});
}

Value int_full(FunctionBuilder& b, ElementType type, const Dims& dims, int64_t value) {
  Value c = b.constant(Shape{type, {}}, FunctionBuilder::integer_literal(type, value));
  return broadcast_in_dim(b, c, dims, {});
}

Value sign_bit(FunctionBuilder& b, const Value& x) {
  ElementType t = x.shape.type;
  if (hlo::is_signed_integer(t)) return compare(b, x, full(b, t, x.shape.dims, 0), "LT");
  if (!hlo::is_floating(t)) return full(b, ElementType::kPred, x.shape.dims, 0);
  ElementType bits = hlo::byte_width(t) == 8   ? ElementType::kS64
                     : hlo::byte_width(t) == 4 ? ElementType::kS32
                                               : ElementType::kS16;
  return compare(b, bitcast(b, x, bits), full(b, bits, x.shape.dims, 0), "LT");
}

ElementType wide(ElementType type) {
  return hlo::is_floating(type) ? ElementType::kF64 : type;
}

std::vector<Value> while_loop(FunctionBuilder& b, const std::vector<Value>& state,
                              const LoopFn& cond, const LoopFn& body) {
  std::vector<Shape> shapes;
  for (const Value& v : state) shapes.push_back(v.shape);
  return b.op_with_regions("stablehlo.while", state, shapes, {{shapes, cond}, {shapes, body}});
}

const char* scalar_type_name(ElementType type) {
  switch (type) {
    case ElementType::kPred: return "Bool";
    case ElementType::kS8: return "Char";
    case ElementType::kS16: return "Short";
    case ElementType::kS32: return "Int";
    case ElementType::kS64: return "Long";
    case ElementType::kU8: return "Byte";
    case ElementType::kU16: return "UInt16";
    case ElementType::kU32: return "UInt32";
    case ElementType::kU64: return "UInt64";
    case ElementType::kF16: return "Half";
    case ElementType::kF32: return "Float";
    case ElementType::kF64: return "Double";
    case ElementType::kBF16: return "BFloat16";
    case ElementType::kC64: return "ComplexFloat";
    case ElementType::kC128: return "ComplexDouble";
  }
  return "unknown";
}

std::pair<Value, Value> real_and_imag(FunctionBuilder& b, const Value& x) {
  hlo::Shape part{real_part(x.shape.type), x.shape.dims};
  return {b.op("stablehlo.real", {x}, part), b.op("stablehlo.imag", {x}, part)};
}

Value make_complex(FunctionBuilder& b, const Value& re, const Value& im, ElementType type) {
  return b.op("stablehlo.complex", {re, im}, hlo::Shape{type, re.shape.dims});
}

Value conjugate(FunctionBuilder& b, const Value& x) {
  if (!hlo::is_complex(x.shape.type)) return x;
  auto [re, im] = real_and_imag(b, x);
  return make_complex(b, re, unary(b, "stablehlo.negate", im), x.shape.type);
}

Value divide(FunctionBuilder& b, const Value& x, const Value& y) {
  if (!hlo::is_complex(x.shape.type)) return binary(b, "stablehlo.divide", x, y);
  auto [p, q] = real_and_imag(b, x);
  auto [c, d] = real_and_imag(b, y);
  auto op = [&b](const char* name) {
    return [&b, name](const Value& u, const Value& v) { return binary(b, name, u, v); };
  };
  auto mul = op("stablehlo.multiply"), div = op("stablehlo.divide");
  // u + v and u - v with IEEE's zeros (a zero sum is -0 only for -0 + -0), which XLA's folding of
  // a constant 0 operand (x + 0 -> x, 0 - x -> -x) does not keep: reciprocal(-0 + 2i) had -0.
  Value one = full(b, c.shape.type, c.shape.dims, 1), zero = full(b, c.shape.type, c.shape.dims, 0);
  auto zero_signed = [&b, &zero](const Value& sum, const Value& negative) {
    Value signed_zero = select(b, negative, unary(b, "stablehlo.negate", zero), zero);
    return select(b, compare(b, sum, zero, "EQ"), signed_zero, sum);
  };
  auto add = [&](const Value& u, const Value& v) {
    return zero_signed(binary(b, "stablehlo.add", u, v), b_and(b, sign_bit(b, u), sign_bit(b, v)));
  };
  auto sub = [&](const Value& u, const Value& v) {
    Value negative = b_and(b, sign_bit(b, u), unary(b, "stablehlo.not", sign_bit(b, v)));
    return zero_signed(binary(b, "stablehlo.subtract", u, v), negative);
  };
  Value abs_c = unary(b, "stablehlo.abs", c), abs_d = unary(b, "stablehlo.abs", d);
  // |c| >= |d| (false where either is NaN): the ratio d / c
  Value rat = div(d, c), scl = div(one, add(c, mul(d, rat)));
  Value re_c = mul(add(p, mul(q, rat)), scl), im_c = mul(sub(q, mul(p, rat)), scl);
  // both zero: an infinity or NaN in each part
  Value both_zero = b_and(b, compare(b, abs_c, zero, "EQ"), compare(b, abs_d, zero, "EQ"));
  re_c = select(b, both_zero, div(p, abs_c), re_c);
  im_c = select(b, both_zero, div(q, abs_d), im_c);
  // else the ratio c / d
  Value rat_d = div(c, d), scl_d = div(one, add(d, mul(c, rat_d)));
  Value re_d = mul(add(mul(p, rat_d), q), scl_d), im_d = mul(sub(mul(q, rat_d), p), scl_d);
  Value by_c = compare(b, abs_c, abs_d, "GE");
  return make_complex(b, select(b, by_c, re_c, re_d), select(b, by_c, im_c, im_d), x.shape.type);
}

}  // namespace torchtpu::lowering
