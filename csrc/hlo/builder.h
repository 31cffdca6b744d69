// Emits one StableHLO function, `func.func public @main`, as MLIR text in the generic op form.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "hlo/types.h"

namespace torchtpu::hlo {

struct Value {
  std::string name;  // "%3", "%arg0", "%5#1"
  Shape shape;
};

class FunctionBuilder {
 public:
  using RegionBody =
      std::function<std::vector<Value>(FunctionBuilder&, const std::vector<Value>& args)>;

  Value parameter(const Shape& shape);
  // One generic-form op: `%n = "name"(operands) {attributes} : (types) -> type`.
  Value op(const std::string& name, const std::vector<Value>& operands, const Shape& result,
           const std::string& attributes = "");
  std::vector<Value> ops(const std::string& name, const std::vector<Value>& operands,
                         const std::vector<Shape>& results, const std::string& attributes = "");
  // An op with one single-block region whose arguments have `region_args` shapes (reduce, scatter).
  std::vector<Value> op_with_region(const std::string& name, const std::vector<Value>& operands,
                                    const std::vector<Shape>& results,
                                    const std::vector<Shape>& region_args, const RegionBody& body,
                                    const std::string& attributes = "");
  // The same with several regions (stablehlo.while: a condition and a body).
  struct Region {
    std::vector<Shape> args;
    RegionBody body;
  };
  std::vector<Value> op_with_regions(const std::string& name, const std::vector<Value>& operands,
                                     const std::vector<Shape>& results,
                                     const std::vector<Region>& regions,
                                     const std::string& attributes = "");
  Value constant(const Shape& shape, const std::string& dense_literal);
  // Top-level functions placed after @main (e.g. an exported module's, which a func.call op
  // calls): `text` is their definitions, added once per `name`.
  void add_functions(const std::string& name, const std::string& text);

  // The whole module, with `results` returned from @main in order. Each (parameter, result) of
  // `donated` lets the result reuse the parameter's buffer (tf.aliasing_output): the argument
  // passed there is consumed by the run.
  std::string module(const std::vector<Value>& results,
                     const std::vector<std::pair<int, int>>& donated = {}) const;

  // Attribute spellings.
  static std::string i64_array(const std::vector<int64_t>& values);  // array<i64: 1, 2>
  static std::string i64_list(const std::vector<int64_t>& values);   // [1, 2]
  // Window padding, one (low, high) pair per dim: dense<[[0, 1], [2, 2]]> : tensor<2x2xi64>
  static std::string padding(const std::vector<std::pair<int64_t, int64_t>>& pads);
  // An exact dense literal for one element: hex bits for floats, decimal for integers.
  static std::string scalar_literal(ElementType type, double value);
  static std::string integer_literal(ElementType type, int64_t value);

 private:
  std::string fresh_name();
  void emit(const std::string& line);

  std::vector<Shape> parameters_;
  std::string body_;
  std::vector<std::pair<std::string, std::string>> functions_;  // (name, definitions)
  std::string indent_ = "    ";
  int next_id_ = 0;
};

}  // namespace torchtpu::hlo
