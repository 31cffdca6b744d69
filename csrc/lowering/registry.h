// The lowering table: op name -> a pure function from operand values and attributes to HLO.
// Rules never see buffers, so one rule serves every eager mode and torch.compile.
#pragma once

#include <string>
#include <vector>

#include "hlo/builder.h"
#include "lowering/attrs.h"

namespace torchtpu::lowering {

using Values = std::vector<hlo::Value>;
using LoweringRule = Values (*)(hlo::FunctionBuilder& b, const Values& operands,
                                const Attrs& attrs);

// Throws std::out_of_range naming the op when no rule is registered.
LoweringRule rule(const std::string& op);
bool has_rule(const std::string& op);

class Registry;
// Each op family adds its rules here; called once when the table is built.
void register_view_rules(Registry& r);
void register_elementwise_rules(Registry& r);

class Registry {
 public:
  void add(const std::string& op, LoweringRule rule);
};

}  // namespace torchtpu::lowering
