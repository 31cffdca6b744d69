#include "lowering/helpers.h"

#include <numeric>

namespace torchtpu::lowering {
namespace {

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
    ElementType part = v.shape.type == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64;
    Value re = b.op("stablehlo.real", {v}, Shape{part, v.shape.dims});
    return convert(b, re, type);
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

Value pad_end(FunctionBuilder& b, const Value& v, int64_t count) {
  if (count == 0) return v;
  Value zero = constant(b, v.shape.type, 0);
  return b.op("stablehlo.pad", {v, zero}, Shape{v.shape.type, {v.shape.dims[0] + count}},
              "edge_padding_low = array<i64: 0>, edge_padding_high = " +
                  FunctionBuilder::i64_array({count}) + ", interior_padding = array<i64: 0>");
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
    ElementType part = type == ElementType::kC64 ? ElementType::kF32 : ElementType::kF64;
    return convert(b, constant(b, part, value), type);
  }
  return b.constant(Shape{type, {}}, FunctionBuilder::scalar_literal(type, value));
}

Value full(FunctionBuilder& b, ElementType type, const Dims& dims, double value) {
  return broadcast_in_dim(b, constant(b, type, value), dims, {});
}

Value unary(FunctionBuilder& b, const std::string& op, const Value& x) {
  return b.op(op, {x}, x.shape);
}

Value binary(FunctionBuilder& b, const std::string& op, const Value& x, const Value& y) {
  return b.op(op, {x, y}, x.shape);
}

Value compare(FunctionBuilder& b, const Value& x, const Value& y, const std::string& direction) {
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
