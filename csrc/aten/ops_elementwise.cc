// Elementwise arithmetic: PyTorch's checks, type promotion and broadcasting, then one program
// that reads the operands, applies the rule and writes the result through the output's view.
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>

#include "aten/ops.h"
#include "aten/tensor_view.h"

namespace torchtpu::aten {
namespace {

enum class Output { kNew, kInPlace, kOut };

struct Binary {
  const char* op;
  bool true_division = false;
  const char* mode = nullptr;             // div's rounding mode
  const at::Scalar* alpha = nullptr;      // add/sub
};

at::Tensor run_binary(const Binary& spec, const at::Tensor& self, const at::Tensor& other,
                      Output kind, at::Tensor out = {}) {
  c10::Device device = common_device({&self, &other, kind == Output::kNew ? nullptr : &out});
  at::ScalarType dtype = at::result_type(self, other);
  if (spec.true_division && c10::isIntegralType(dtype, /*includeBool=*/true)) {
    dtype = c10::get_default_dtype_as_scalartype();
  }
  if (spec.alpha != nullptr) at::native::alpha_check(dtype, *spec.alpha);
  bool rounded_division = spec.mode != nullptr && std::string(spec.mode) != "true";
  TORCH_CHECK_NOT_IMPLEMENTED(!rounded_division || !(dtype == at::kBool || c10::isComplexType(dtype)),
                              "\"div_", spec.mode, "_tpu\" not implemented for '", c10::toString(dtype),
                              "'");
  if (std::string(spec.op) == "sub") at::native::sub_check(self, other);
  at::DimVector shape = at::infer_size_dimvector(self.sizes(), other.sizes());

  if (kind == Output::kNew) {
    out = at::empty(shape, at::TensorOptions().dtype(dtype).device(device));
  } else {
    TORCH_CHECK(at::canCast(dtype, out.scalar_type()), "result type ", dtype,
                " can't be cast to the desired output type ", out.scalar_type());
    if (kind == Output::kInPlace) {
      TORCH_CHECK(out.sizes().equals(shape), "output with shape ", out.sizes(),
                  " doesn't match the broadcast shape ", at::IntArrayRef(shape));
    } else {
      at::native::resize_output(out, shape);
    }
    at::assert_no_internal_overlap(out);
    for (const at::Tensor* input : {&self, &other}) {
      if (input->is_privateuseone()) at::assert_no_partial_overlap(out, *input);
    }
  }
  if (out.numel() == 0) return out;

  engine::Program p(device.index());
  std::vector<int> inputs{read_operand(p, self, dtype), read_operand(p, other, dtype)};
  if (spec.alpha != nullptr && !spec.alpha->equal(1)) {
    inputs.push_back(scalar_argument(p, *spec.alpha, dtype));
  }
  std::vector<int64_t> dims(shape.begin(), shape.end());
  lowering::Attrs attrs;
  attrs.set_type("type", element_type(dtype)).set("shape", dims);
  if (spec.mode != nullptr) attrs.set("mode", std::string(spec.mode));
  int result = p.apply(spec.op, std::move(inputs), std::move(attrs));
  if (out.scalar_type() != dtype) {
    result = p.apply("cast", {result},
                     lowering::Attrs()
                         .set_type("type", element_type(out.scalar_type()))
                         .set("shape", dims));
  }
  p.write(view_of(out), result);
  p.run();
  return out;
}

const char* rounding(std::optional<c10::string_view> mode) {
  if (!mode) return "true";
  if (*mode == "trunc") return "trunc";
  if (*mode == "floor") return "floor";
  TORCH_CHECK(false,
              "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
              *mode, "'");
}

Binary division(std::optional<c10::string_view> mode) {
  const char* m = rounding(mode);
  return Binary{"div", std::string(m) == "true", m};
}

}  // namespace

at::Tensor add(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return run_binary({"add", false, nullptr, &alpha}, self, other, Output::kNew);
}
at::Tensor& add_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  run_binary({"add", false, nullptr, &alpha}, self, other, Output::kInPlace, self);
  return self;
}
at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out) {
  run_binary({"add", false, nullptr, &alpha}, self, other, Output::kOut, out);
  return out;
}

at::Tensor sub(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  return run_binary({"sub", false, nullptr, &alpha}, self, other, Output::kNew);
}
at::Tensor& sub_(at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha) {
  run_binary({"sub", false, nullptr, &alpha}, self, other, Output::kInPlace, self);
  return self;
}
at::Tensor& sub_out(const at::Tensor& self, const at::Tensor& other, const at::Scalar& alpha,
                    at::Tensor& out) {
  run_binary({"sub", false, nullptr, &alpha}, self, other, Output::kOut, out);
  return out;
}

at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return run_binary({"mul"}, self, other, Output::kNew);
}
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  run_binary({"mul"}, self, other, Output::kInPlace, self);
  return self;
}
at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  run_binary({"mul"}, self, other, Output::kOut, out);
  return out;
}

at::Tensor div(const at::Tensor& self, const at::Tensor& other) {
  return div_mode(self, other, std::nullopt);
}
at::Tensor& div_(at::Tensor& self, const at::Tensor& other) {
  return div_mode_(self, other, std::nullopt);
}
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return div_mode_out(self, other, std::nullopt, out);
}
at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other,
                    std::optional<c10::string_view> rounding_mode) {
  return run_binary(division(rounding_mode), self, other, Output::kNew);
}
at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other,
                      std::optional<c10::string_view> rounding_mode) {
  run_binary(division(rounding_mode), self, other, Output::kInPlace, self);
  return self;
}
at::Tensor& div_mode_out(const at::Tensor& self, const at::Tensor& other,
                         std::optional<c10::string_view> rounding_mode, at::Tensor& out) {
  run_binary(division(rounding_mode), self, other, Output::kOut, out);
  return out;
}

}  // namespace torchtpu::aten
