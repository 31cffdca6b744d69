// Device-side checks (engine/device_asserts.h): a rule folds "some value is out of range" into
// the device's assert flag, so the host learns of it at its next wait instead of per op.
#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// Operands [flag, values, id]: the flag (s64[2]: the first failed check's id and the value that
// failed it, zeros while none failed), the integer values to check, the id of this check (0-d
// s64). Attrs `low`, `high`: values must lie in [low, high), except `ignore` when it is given.
// The flag comes out unchanged if it already holds a failure, else with this check's id and
// its largest offending value, if any.
Values assert_in_range(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  const Value& flag = operands[0];
  const Value& id = operands[2];
  Value values = convert(b, operands[1], ElementType::kS64);
  values = reshape(b, values, {values.shape.numel()});
  Dims dims = values.shape.dims;
  Value low = full(b, ElementType::kS64, dims, static_cast<double>(attrs.i("low")));
  Value high = full(b, ElementType::kS64, dims, static_cast<double>(attrs.i("high")));
  Value bad = b_or(b, compare(b, values, low, "LT"), compare(b, values, high, "GE"));
  if (attrs.has("ignore")) {
    Value ignore = full(b, ElementType::kS64, dims, static_cast<double>(attrs.i("ignore")));
    bad = b_and(b, bad, compare(b, values, ignore, "NE"));
  }
  Value lowest = extreme(b, ElementType::kS64, false);
  Value worst = reduce(b, select(b, bad, values, broadcast_to(b, lowest, dims)), {0}, lowest,
                       "stablehlo.maximum");
  Value failed = reduce(b, bad, {0}, constant(b, ElementType::kPred, 0), "stablehlo.or");
  Value mine = concatenate(b, {reshape(b, id, {1}), reshape(b, worst, {1})}, 0);
  Value none = full(b, ElementType::kS64, {2}, 0);
  Value earlier = compare(b, slice(b, flag, {0}, {1}), full(b, ElementType::kS64, {1}, 0), "NE");
  Value keep = broadcast_to(b, reshape(b, earlier, {}), {2});
  Value now = select(b, broadcast_to(b, failed, {2}), mine, none);
  return {select(b, keep, flag, now)};
}

}  // namespace

void register_assert_rules(Registry& r) { r.add("assert_in_range", assert_in_range); }

}  // namespace torchtpu::lowering
