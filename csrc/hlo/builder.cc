#include "hlo/builder.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace torchtpu::hlo {
namespace {

std::string type_list(const std::vector<Value>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i].shape.mlir();
  return s;
}

std::string type_list(const std::vector<Shape>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + shapes[i].mlir();
  return s;
}

std::string name_list(const std::vector<Value>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i].name;
  return s;
}

std::string hex_bits(uint64_t bits, int digits) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string s = "0x";
  for (int i = digits - 1; i >= 0; --i) s += kHex[(bits >> (4 * i)) & 0xF];
  return s;
}

uint16_t to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = ((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFF;
  if (((x >> 23) & 0xFF) == 0xFF) return sign | 0x7C00 | (mant ? 0x200 : 0);  // inf / nan
  if (exp >= 31) return sign | 0x7C00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    uint32_t shift = 14 - exp;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | half;
  }
  uint32_t half = sign | (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return half;
}

uint16_t to_bfloat16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

}  // namespace

std::string FunctionBuilder::fresh_name() { return "%" + std::to_string(next_id_++); }

void FunctionBuilder::emit(const std::string& line) { body_ += indent_ + line + "\n"; }

Value FunctionBuilder::parameter(const Shape& shape) {
  parameters_.push_back(shape);
  return Value{"%arg" + std::to_string(parameters_.size() - 1), shape};
}

Value FunctionBuilder::op(const std::string& name, const std::vector<Value>& operands,
                          const Shape& result, const std::string& attributes) {
  return ops(name, operands, {result}, attributes)[0];
}

std::vector<Value> FunctionBuilder::ops(const std::string& name,
                                        const std::vector<Value>& operands,
                                        const std::vector<Shape>& results,
                                        const std::string& attributes) {
  return op_with_region(name, operands, results, {}, nullptr, attributes);
}

std::vector<Value> FunctionBuilder::op_with_region(const std::string& name,
                                                   const std::vector<Value>& operands,
                                                   const std::vector<Shape>& results,
                                                   const std::vector<Shape>& region_args,
                                                   const RegionBody& body,
                                                   const std::string& attributes) {
  std::vector<Region> regions;
  if (body) regions.push_back({region_args, body});
  return op_with_regions(name, operands, results, regions, attributes);
}

std::vector<Value> FunctionBuilder::op_with_regions(const std::string& name,
                                                    const std::vector<Value>& operands,
                                                    const std::vector<Shape>& results,
                                                    const std::vector<Region>& regions,
                                                    const std::string& attributes) {
  std::string result_name = fresh_name();
  std::string region;
  for (size_t n = 0; n < regions.size(); ++n) {
    std::string outer_body = std::move(body_);
    std::string outer_indent = indent_;
    body_.clear();
    indent_ += "    ";
    std::vector<Value> args;
    std::string header = "^bb0(";
    for (size_t i = 0; i < regions[n].args.size(); ++i) {
      args.push_back(Value{"%r" + std::to_string(next_id_++), regions[n].args[i]});
      header += (i ? ", " : "") + args.back().name + ": " + regions[n].args[i].mlir();
    }
    std::vector<Value> returned = regions[n].body(*this, args);
    emit("\"stablehlo.return\"(" + name_list(returned) + ") : (" + type_list(returned) +
         ") -> ()");
    region += (n ? ", {\n" : " ({\n") + outer_indent + "  " + header + "):\n" + body_ +
              outer_indent + "}";
    body_ = std::move(outer_body);
    indent_ = outer_indent;
  }
  if (!regions.empty()) region += ")";
  std::string line = result_name + (results.size() > 1 ? ":" + std::to_string(results.size()) : "") +
                     " = \"" + name + "\"(" + name_list(operands) + ")" + region;
  if (!attributes.empty()) line += " {" + attributes + "}";
  line += " : (" + type_list(operands) + ") -> ";
  line += results.size() == 1 ? results[0].mlir() : "(" + type_list(results) + ")";
  emit(line);
  std::vector<Value> values;
  for (size_t i = 0; i < results.size(); ++i) {
    values.push_back(Value{results.size() == 1 ? result_name
                                               : result_name + "#" + std::to_string(i),
                           results[i]});
  }
  return values;
}

Value FunctionBuilder::constant(const Shape& shape, const std::string& dense_literal) {
  return op("stablehlo.constant", {}, shape,
            "value = dense<" + dense_literal + "> : " + shape.mlir());
}

void FunctionBuilder::add_functions(const std::string& name, const std::string& text) {
  for (const auto& f : functions_) {
    if (f.first == name) return;
  }
  functions_.emplace_back(name, text);
}

std::string FunctionBuilder::module(const std::vector<Value>& results,
                                    const std::vector<std::pair<int, int>>& donated) const {
  std::string s = "module @torchtpu {\n  func.func public @main(";
  for (size_t i = 0; i < parameters_.size(); ++i) {
    s += (i ? ", " : "") + std::string("%arg") + std::to_string(i) + ": " + parameters_[i].mlir();
    for (const auto& [parameter, result] : donated) {
      if (parameter == static_cast<int>(i)) {
        s += " {tf.aliasing_output = " + std::to_string(result) + " : i32}";
      }
    }
  }
  s += ") -> (" + type_list(results) + ") {\n" + body_;
  s += "    \"func.return\"(" + name_list(results) + ") : (" + type_list(results) + ") -> ()\n";
  s += "  }\n";
  for (const auto& f : functions_) s += f.second + "\n";
  return s + "}\n";
}

std::string FunctionBuilder::i64_array(const std::vector<int64_t>& values) {
  std::string s = "array<i64";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : ": ") + std::to_string(values[i]);
  return s + ">";
}

std::string FunctionBuilder::i64_list(const std::vector<int64_t>& values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

std::string FunctionBuilder::padding(const std::vector<std::pair<int64_t, int64_t>>& pads) {
  std::string s = "dense<[";
  for (size_t i = 0; i < pads.size(); ++i) {
    s += (i ? ", [" : "[") + std::to_string(pads[i].first) + ", " +
         std::to_string(pads[i].second) + "]";
  }
  return s + "]> : tensor<" + std::to_string(pads.size()) + "x2xi64>";
}

std::string FunctionBuilder::scalar_literal(ElementType type, double value) {
  switch (type) {
    case ElementType::kF64: {
      uint64_t bits;
      std::memcpy(&bits, &value, 8);
      return hex_bits(bits, 16);
    }
    case ElementType::kF32: {
      float f = static_cast<float>(value);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return hex_bits(bits, 8);
    }
    case ElementType::kF16: return hex_bits(to_half_bits(static_cast<float>(value)), 4);
    case ElementType::kBF16: return hex_bits(to_bfloat16_bits(static_cast<float>(value)), 4);
    case ElementType::kPred: return value != 0 ? "true" : "false";
    case ElementType::kC64:
    case ElementType::kC128:
      throw std::invalid_argument("complex literals are built as a real constant and a convert");
    default: return integer_literal(type, static_cast<int64_t>(value));
  }
}

std::string FunctionBuilder::integer_literal(ElementType type, int64_t value) {
  if (type == ElementType::kPred) return value != 0 ? "true" : "false";
  if (is_floating(type) || is_complex(type)) return scalar_literal(type, static_cast<double>(value));
  if (is_unsigned_integer(type)) return std::to_string(static_cast<uint64_t>(value));
  return std::to_string(value);
}

}  // namespace torchtpu::hlo
