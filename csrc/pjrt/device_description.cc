#include "pjrt/device_description.h"

namespace torchtpu::pjrt {
namespace {

AttributeValue read_value(const PJRT_NamedValue& value) {
  switch (value.type) {
    case PJRT_NamedValue_kString:
      return std::string(value.string_value, value.value_size);
    case PJRT_NamedValue_kInt64:
      return value.int64_value;
    case PJRT_NamedValue_kInt64List:
      return std::vector<int64_t>(value.int64_array_value,
                                  value.int64_array_value + value.value_size);
    case PJRT_NamedValue_kFloat:
      return value.float_value;
    case PJRT_NamedValue_kBool:
      return value.bool_value;
  }
  throw Error(ErrorCode::kInvalidArgument, "torchtpu: the PJRT plugin reports attribute '" +
                                               std::string(value.name, value.name_size) +
                                               "' with unknown value type " +
                                               std::to_string(static_cast<int>(value.type)));
}

std::string text(const char* data, size_t size) {
  return data == nullptr ? std::string() : std::string(data, size);
}

}  // namespace

Attributes read_named_values(const PJRT_NamedValue* values, size_t count) {
  Attributes attributes;
  for (size_t i = 0; i < count; ++i) {
    attributes[std::string(values[i].name, values[i].name_size)] = read_value(values[i]);
  }
  return attributes;
}

DeviceDescription describe(const Plugin& plugin, const Device& device) {
  DeviceDescription out;
  TORCHTPU_PJRT_ARGS(PJRT_Device_GetDescription_Args, get);
  get.device = device.raw();
  TORCHTPU_PJRT_CALL(plugin, PJRT_Device_GetDescription, &get);
  PJRT_DeviceDescription* description = get.device_description;
  out.id = device.id();
  out.kind = device.kind();

  TORCHTPU_PJRT_ARGS(PJRT_DeviceDescription_ProcessIndex_Args, process);
  process.device_description = description;
  TORCHTPU_PJRT_CALL(plugin, PJRT_DeviceDescription_ProcessIndex, &process);
  out.process_index = process.process_index;

  TORCHTPU_PJRT_ARGS(PJRT_DeviceDescription_DebugString_Args, debug);
  debug.device_description = description;
  TORCHTPU_PJRT_CALL(plugin, PJRT_DeviceDescription_DebugString, &debug);
  out.debug_string = text(debug.debug_string, debug.debug_string_size);

  TORCHTPU_PJRT_ARGS(PJRT_DeviceDescription_ToString_Args, terse);
  terse.device_description = description;
  TORCHTPU_PJRT_CALL(plugin, PJRT_DeviceDescription_ToString, &terse);
  out.to_string = text(terse.to_string, terse.to_string_size);

  if (plugin.provides(&PJRT_Api::PJRT_DeviceDescription_Attributes)) {
    TORCHTPU_PJRT_ARGS(PJRT_DeviceDescription_Attributes_Args, attributes);
    attributes.device_description = description;
    TORCHTPU_PJRT_CALL(plugin, PJRT_DeviceDescription_Attributes, &attributes);
    out.attributes = read_named_values(attributes.attributes, attributes.num_attributes);
  }
  if (plugin.provides(&PJRT_Api::PJRT_Device_LocalHardwareId)) {
    TORCHTPU_PJRT_ARGS(PJRT_Device_LocalHardwareId_Args, local);
    local.device = device.raw();
    TORCHTPU_PJRT_CALL(plugin, PJRT_Device_LocalHardwareId, &local);
    out.local_hardware_id = local.local_hardware_id;
  }
  return out;
}

}  // namespace torchtpu::pjrt
