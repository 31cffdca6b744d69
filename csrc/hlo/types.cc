#include "hlo/types.h"

#include <stdexcept>

namespace torchtpu::hlo {

const char* mlir_name(ElementType type) {
  switch (type) {
    case ElementType::kPred: return "i1";
    case ElementType::kS8: return "i8";
    case ElementType::kS16: return "i16";
    case ElementType::kS32: return "i32";
    case ElementType::kS64: return "i64";
    case ElementType::kU8: return "ui8";
    case ElementType::kU16: return "ui16";
    case ElementType::kU32: return "ui32";
    case ElementType::kU64: return "ui64";
    case ElementType::kF16: return "f16";
    case ElementType::kF32: return "f32";
    case ElementType::kF64: return "f64";
    case ElementType::kBF16: return "bf16";
    case ElementType::kC64: return "complex<f32>";
    case ElementType::kC128: return "complex<f64>";
  }
  throw std::invalid_argument("unknown element type");
}

const char* short_name(ElementType type) {
  switch (type) {
    case ElementType::kC64: return "c64";
    case ElementType::kC128: return "c128";
    case ElementType::kPred: return "pred";
    default: return mlir_name(type);
  }
}

size_t byte_width(ElementType type) {
  switch (type) {
    case ElementType::kPred:
    case ElementType::kS8:
    case ElementType::kU8: return 1;
    case ElementType::kS16:
    case ElementType::kU16:
    case ElementType::kF16:
    case ElementType::kBF16: return 2;
    case ElementType::kS32:
    case ElementType::kU32:
    case ElementType::kF32: return 4;
    case ElementType::kS64:
    case ElementType::kU64:
    case ElementType::kF64:
    case ElementType::kC64: return 8;
    case ElementType::kC128: return 16;
  }
  throw std::invalid_argument("unknown element type");
}

bool is_floating(ElementType type) {
  return type == ElementType::kF16 || type == ElementType::kBF16 || type == ElementType::kF32 ||
         type == ElementType::kF64;
}

bool is_complex(ElementType type) {
  return type == ElementType::kC64 || type == ElementType::kC128;
}

bool is_signed_integer(ElementType type) {
  return type == ElementType::kS8 || type == ElementType::kS16 || type == ElementType::kS32 ||
         type == ElementType::kS64;
}

bool is_unsigned_integer(ElementType type) {
  return type == ElementType::kU8 || type == ElementType::kU16 || type == ElementType::kU32 ||
         type == ElementType::kU64;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string Shape::mlir() const {
  std::string s = "tensor<";
  for (int64_t d : dims) s += std::to_string(d) + "x";
  s += mlir_name(type);
  s += ">";
  return s;
}

}  // namespace torchtpu::hlo
