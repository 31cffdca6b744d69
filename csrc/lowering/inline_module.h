// The modules the call_module op inlines, by entry-point name (inline_module.cc).
#pragma once

#include <string>

namespace torchtpu::lowering {

// `functions`: StableHLO function definitions (no module around them), private, one of them
// named `entry`, none named @main. Registering an entry again replaces its text.
void register_inlined_module(const std::string& entry, const std::string& functions);
bool has_inlined_module(const std::string& entry);

}  // namespace torchtpu::lowering
