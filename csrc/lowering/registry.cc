#include "lowering/registry.h"

#include <unordered_map>

namespace torchtpu::lowering {
namespace {

struct Table {
  std::unordered_map<std::string, LoweringRule> rules;
  std::vector<AtenBinding> bindings;
};

Table& table() {
  static Table t;
  return t;
}

const Table& built_table() {
  static const bool built = [] {
    Registry r;
    register_view_rules(r);
    register_elementwise_rules(r);
    register_math_rules(r);
    register_special_rules(r);
    register_reduction_rules(r);
    register_linalg_rules(r);
    register_factorization_rules(r);
    register_matrix_function_rules(r);
    register_ldl_rules(r);
    register_fft_rules(r);
    register_decomposition_rules(r);
    register_nn_rules(r);
    register_indexing_rules(r);
    register_shape_rules(r);
    register_random_rules(r);
    register_conv_rules(r);
    register_pooling_rules(r);
    register_assert_rules(r);
    register_activation_rules(r);
    register_loss_rules(r);
    register_distance_rules(r);
    register_scan_rules(r);
    register_sort_rules(r);
    register_search_rules(r);
    register_upsample_rules(r);
    register_padding_rules(r);
    register_grid_sample_rules(r);
    register_embedding_bag_rules(r);
    register_segment_reduce_rules(r);
    register_ctc_loss_rules(r);
    register_amp_rules(r);
    register_inline_module_rules(r);
    return true;
  }();
  (void)built;
  return table();
}

}  // namespace

void Registry::add(const std::string& op, LoweringRule rule, std::vector<std::string> aten_ops) {
  bind(op, rule, std::move(aten_ops), false);
}

void Registry::elementwise(const std::string& op, LoweringRule rule,
                           std::vector<std::string> aten_ops) {
  bind(op, rule, std::move(aten_ops), true);
}

void Registry::predicate(const std::string& op, LoweringRule rule,
                         std::vector<std::string> aten_ops) {
  bind(op, rule, std::move(aten_ops), true, true);
}

void Registry::bind(const std::string& op, LoweringRule rule, std::vector<std::string> aten_ops,
                    bool elementwise, bool boolean_result) {
  if (!table().rules.emplace(op, rule).second) {
    throw std::logic_error("torchtpu: two lowering rules for '" + op + "'");
  }
  for (std::string& aten : aten_ops) {
    table().bindings.push_back({std::move(aten), op, elementwise, boolean_result});
  }
}

LoweringRule rule(const std::string& op) {
  const auto& rules = built_table().rules;
  auto it = rules.find(op);
  if (it == rules.end()) throw std::out_of_range("torchtpu: no lowering rule for '" + op + "'");
  return it->second;
}

bool has_rule(const std::string& op) { return built_table().rules.count(op) != 0; }

const std::vector<AtenBinding>& aten_bindings() { return built_table().bindings; }

}  // namespace torchtpu::lowering
