#include "lowering/registry.h"

#include <stdexcept>
#include <unordered_map>

namespace torchtpu::lowering {
namespace {

std::unordered_map<std::string, LoweringRule>& table() {
  static std::unordered_map<std::string, LoweringRule> rules;
  return rules;
}

const std::unordered_map<std::string, LoweringRule>& built_table() {
  static const bool built = [] {
    Registry r;
    register_view_rules(r);
    register_elementwise_rules(r);
    return true;
  }();
  (void)built;
  return table();
}

}  // namespace

void Registry::add(const std::string& op, LoweringRule rule) {
  if (!table().emplace(op, rule).second) {
    throw std::logic_error("torchtpu: two lowering rules for '" + op + "'");
  }
}

LoweringRule rule(const std::string& op) {
  const auto& rules = built_table();
  auto it = rules.find(op);
  if (it == rules.end()) throw std::out_of_range("torchtpu: no lowering rule for '" + op + "'");
  return it->second;
}

bool has_rule(const std::string& op) { return built_table().count(op) != 0; }

}  // namespace torchtpu::lowering
