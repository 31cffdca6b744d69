// Exported StableHLO modules (JAX functions and Pallas kernels, through torchtpu.kernels) as ops of
// torchtpu's own programs: the module's functions are placed beside @main, renamed and private,
// and the op is a func.call of its entry point, so XLA inlines and fuses it with the ops around
// it, in every eager mode and in compiled graphs alike.
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "lowering/helpers.h"
#include "lowering/inline_module.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

std::mutex& modules_mutex() {
  static std::mutex m;
  return m;
}

std::unordered_map<std::string, std::string>& modules() {
  static auto* m = new std::unordered_map<std::string, std::string>();  // outlives statics
  return *m;
}

std::string functions_of(const std::string& entry) {
  std::lock_guard<std::mutex> lock(modules_mutex());
  auto it = modules().find(entry);
  if (it == modules().end()) {
    throw std::invalid_argument("torchtpu: no inlined module has the entry point @" + entry);
  }
  return it->second;
}

// call_module: operands are the entry point's arguments; attributes "entry" (the function's
// name), "outputs" (how many results) and each result's "type"/"shape", "type1"/"shape1", ...
Values call_module(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  const std::string& entry = attrs.s("entry");
  b.add_functions(entry, functions_of(entry));
  std::vector<Shape> results;
  for (int k = 0; k < attrs.i("outputs"); ++k) {
    results.push_back(Shape{out_type(attrs, k), out_shape(attrs, k)});
  }
  return b.ops("func.call", operands, results, "callee = @" + entry);
}

}  // namespace

void register_inlined_module(const std::string& entry, const std::string& functions) {
  std::lock_guard<std::mutex> lock(modules_mutex());
  modules()[entry] = functions;
}

bool has_inlined_module(const std::string& entry) {
  std::lock_guard<std::mutex> lock(modules_mutex());
  return modules().count(entry) != 0;
}

void register_inline_module_rules(Registry& r) { r.add("call_module", call_module); }

}  // namespace torchtpu::lowering
