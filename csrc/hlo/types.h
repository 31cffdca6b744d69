// Element types and shapes of StableHLO values. Knows nothing of ATen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torchtpu::hlo {

// Numbered as PJRT_Buffer_Type, so a value converts to the C enum with a cast.
enum class ElementType : int {
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
  kC64 = 14,
  kC128 = 15,
};

// "f32", "i64", "ui8", "i1", "complex<f32>".
const char* mlir_name(ElementType type);
const char* short_name(ElementType type);
size_t byte_width(ElementType type);
bool is_floating(ElementType type);  // f16, bf16, f32, f64
bool is_complex(ElementType type);
bool is_signed_integer(ElementType type);
bool is_unsigned_integer(ElementType type);  // excludes pred

struct Shape {
  ElementType type = ElementType::kF32;
  std::vector<int64_t> dims;

  int64_t numel() const;
  size_t rank() const { return dims.size(); }
  // "tensor<2x3xf32>", "tensor<f32>" for rank 0.
  std::string mlir() const;
  bool operator==(const Shape& other) const { return type == other.type && dims == other.dims; }
  bool operator!=(const Shape& other) const { return !(*this == other); }
};

}  // namespace torchtpu::hlo
