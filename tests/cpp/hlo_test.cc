#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu_client.h"
#include "hlo/builder.h"
#include "hlo/fingerprint.h"

namespace torchtpu::hlo {
namespace {

Shape f32(std::vector<int64_t> dims) { return Shape{ElementType::kF32, std::move(dims)}; }

std::vector<float> run(const std::string& text, const std::vector<std::vector<float>>& inputs,
                       const std::vector<Shape>& shapes, size_t out_numel) {
  auto client = testing::cpu_client();
  auto exe = client->compile(text, pjrt::portable_compile_options());
  std::vector<std::unique_ptr<pjrt::Buffer>> buffers;
  std::vector<PJRT_Buffer*> raw;
  for (size_t i = 0; i < inputs.size(); ++i) {
    buffers.push_back(client->buffer_from_host(inputs[i].data(), PJRT_Buffer_Type_F32,
                                               shapes[i].dims, client->device(0)));
    raw.push_back(buffers.back()->raw());
  }
  auto out = exe->execute(raw, client->device(0));
  std::vector<float> host(out_numel);
  out[0]->to_host(host.data(), out_numel * sizeof(float));
  return host;
}

TEST(Shape, SpellsMlirTypes) {
  EXPECT_EQ(f32({2, 3}).mlir(), "tensor<2x3xf32>");
  EXPECT_EQ(f32({}).mlir(), "tensor<f32>");
  EXPECT_EQ((Shape{ElementType::kU8, {0}}).mlir(), "tensor<0xui8>");
  EXPECT_EQ((Shape{ElementType::kC64, {1}}).mlir(), "tensor<1xcomplex<f32>>");
  EXPECT_EQ(f32({2, 0, 3}).numel(), 0);
}

TEST(FunctionBuilder, EmitsARunnableProgramWithAttributes) {
  FunctionBuilder b;
  Value x = b.parameter(f32({3}));
  Value y = b.parameter(f32({2, 3}));
  Value bx = b.op("stablehlo.broadcast_in_dim", {x}, f32({2, 3}),
                  "broadcast_dimensions = " + FunctionBuilder::i64_array({1}));
  Value two = b.constant(f32({}), FunctionBuilder::scalar_literal(ElementType::kF32, 2.0));
  Value two_b = b.op("stablehlo.broadcast_in_dim", {two}, f32({2, 3}),
                     "broadcast_dimensions = " + FunctionBuilder::i64_array({}));
  Value prod = b.op("stablehlo.multiply", {bx, two_b}, f32({2, 3}));
  Value sum = b.op("stablehlo.add", {prod, y}, f32({2, 3}));
  auto out = run(b.module({sum}), {{1, 2, 3}, {0, 10, 20, 30, 40, 50}}, {f32({3}), f32({2, 3})}, 6);
  EXPECT_EQ(out, (std::vector<float>{2, 14, 26, 32, 44, 56}));
}

TEST(FunctionBuilder, CallsFunctionsPlacedBesideMain) {
  // What an exported module becomes (lowering/inline_module.cc): private functions, one calling
  // another, placed once however often they are called.
  const std::string functions =
      "  func.func private @k_main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
      "    %0 = func.call @k_twice(%a) : (tensor<3xf32>) -> tensor<3xf32>\n"
      "    %1 = stablehlo.add %0, %a : tensor<3xf32>\n"
      "    return %1 : tensor<3xf32>\n  }\n"
      "  func.func private @k_twice(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
      "    %0 = stablehlo.add %a, %a : tensor<3xf32>\n"
      "    return %0 : tensor<3xf32>\n  }";
  FunctionBuilder b;
  Value x = b.parameter(f32({3}));
  b.add_functions("k_main", functions);
  Value once = b.op("func.call", {x}, f32({3}), "callee = @k_main");
  b.add_functions("k_main", functions);
  Value twice = b.op("func.call", {once}, f32({3}), "callee = @k_main");
  auto out = run(b.module({twice}), {{1, 2, 3}}, {f32({3})}, 3);
  EXPECT_EQ(out, (std::vector<float>{9, 18, 27}));
}

TEST(FunctionBuilder, EmitsRegions) {
  FunctionBuilder b;
  Value x = b.parameter(f32({2, 3}));
  Value zero = b.constant(f32({}), FunctionBuilder::scalar_literal(ElementType::kF32, 0.0));
  auto sum = b.op_with_region(
      "stablehlo.reduce", {x, zero}, {f32({2})}, {f32({}), f32({})},
      [](FunctionBuilder& r, const std::vector<Value>& args) {
        return std::vector<Value>{r.op("stablehlo.add", {args[0], args[1]}, f32({}))};
      },
      "dimensions = " + FunctionBuilder::i64_array({1}));
  auto out = run(b.module(sum), {{1, 2, 3, 4, 5, 6}}, {f32({2, 3})}, 2);
  EXPECT_EQ(out, (std::vector<float>{6, 15}));
}

TEST(FunctionBuilder, ScalarLiteralsAreExact) {
  EXPECT_EQ(FunctionBuilder::scalar_literal(ElementType::kF32, 1.0), "0x3F800000");
  EXPECT_EQ(FunctionBuilder::scalar_literal(ElementType::kF32, INFINITY), "0x7F800000");
  EXPECT_EQ(FunctionBuilder::scalar_literal(ElementType::kF16, 1.0), "0x3C00");
  EXPECT_EQ(FunctionBuilder::scalar_literal(ElementType::kF16, 65504.0), "0x7BFF");
  EXPECT_EQ(FunctionBuilder::scalar_literal(ElementType::kBF16, 1.0), "0x3F80");
  EXPECT_EQ(FunctionBuilder::scalar_literal(ElementType::kF64, 0.5), "0x3FE0000000000000");
  EXPECT_EQ(FunctionBuilder::integer_literal(ElementType::kU64, -1), "18446744073709551615");
  EXPECT_EQ(FunctionBuilder::integer_literal(ElementType::kPred, 1), "true");
}

TEST(FunctionBuilder, MultipleResultsAreNumbered) {
  FunctionBuilder b;
  Value x = b.parameter(f32({2}));
  auto both = b.ops("stablehlo.optimization_barrier", {x, x}, {f32({2}), f32({2})});
  EXPECT_EQ(both[0].name, both[1].name.substr(0, both[0].name.size() - 2) + "#0");
  EXPECT_NE(b.module({both[1]}).find("= \"stablehlo.optimization_barrier\""), std::string::npos);
}

TEST(Fingerprint, DistinguishesStructure) {
  Fingerprint a, b, c;
  a.add("add");
  a.add(f32({2, 3}));
  b.add("add");
  b.add(f32({2, 3}));
  c.add("add");
  c.add(f32({3, 2}));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.digest(), b.digest());
  EXPECT_FALSE(a == c);
  Fingerprint d, e;  // length-prefixed strings: ("ab","c") differs from ("a","bc")
  d.add("ab");
  d.add("c");
  e.add("a");
  e.add("bc");
  EXPECT_FALSE(d == e);
}

// add_ints writes what add() of the same values as a vector writes, so keys (and the disk cache's
// entries) do not depend on which one built them.
TEST(Fingerprint, IntsWithoutAVectorAreTheVectorsBytes) {
  std::vector<int64_t> values{3, -1, 7};
  Fingerprint a, b, c;
  a.add(values);
  b.add_ints(values.data(), values.size());
  c.add_ints(std::vector<int>{3, -1, 7});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  Fingerprint d;
  d.add_ints(std::vector<int>{3, -1});
  EXPECT_FALSE(a == d);
}

}  // namespace
}  // namespace torchtpu::hlo
