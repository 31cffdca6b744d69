// What a PJRT plugin says about one device: its ids, kind, strings, and the plugin-specific
// attributes (a TPU plugin's "coords" and "core_on_chip", for instance) that topology needs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pjrt/client.h"

namespace torchtpu::pjrt {

// One PJRT_NamedValue's value, by its PJRT_NamedValue_Type.
using AttributeValue = std::variant<std::string, int64_t, std::vector<int64_t>, float, bool>;
using Attributes = std::map<std::string, AttributeValue>;

struct DeviceDescription {
  int id = 0;
  int process_index = 0;
  std::string kind;
  std::optional<int> local_hardware_id;  // empty where the plugin has no such entry point
  std::string debug_string;
  std::string to_string;
  Attributes attributes;  // empty where the plugin reports none
};

// Copies a plugin's named values (their memory belongs to the plugin); a value of a type this
// header does not know is an error naming the attribute.
Attributes read_named_values(const PJRT_NamedValue* values, size_t count);

// Asks the plugin about `device`. The attributes and the local hardware id are optional entry
// points: a plugin without them leaves those fields empty.
DeviceDescription describe(const Plugin& plugin, const Device& device);

}  // namespace torchtpu::pjrt
