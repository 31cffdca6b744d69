// GradScaler's two device steps (torch.amp.GradScaler): unscaling the gradients while noting any
// inf or NaN among them, and updating the scale from that note. Both stay on the device, so a
// float16 training step never waits for the host to decide whether to skip.
#include "lowering/helpers.h"
#include "lowering/registry.h"

namespace torchtpu::lowering {
namespace {

// _amp_foreach_non_finite_check_and_unscale_: operands [grad_0 .. grad_n-1, found_inf,
// inv_scale]. Results: each grad times inv_scale (computed in float32 for half types, as PyTorch
// does), then found_inf, set to 1 when any grad holds an inf or NaN and left as it was otherwise.
Values non_finite_check_and_unscale(FunctionBuilder& b, const Values& operands, const Attrs&) {
  size_t n = operands.size() - 2;
  const Value& found_inf = operands[n];
  Value inv_scale = reshape(b, operands[n + 1], {});
  Values results;
  Value found = reshape(b, convert(b, found_inf, ElementType::kF32), {});
  for (size_t k = 0; k < n; ++k) {
    const Value& grad = operands[k];
    ElementType type = opmath(grad.shape.type);
    Value g = convert(b, grad, type);
    Value scaled = binary(b, "stablehlo.multiply", g, splat(b, inv_scale, type, grad.shape.dims));
    results.push_back(convert(b, scaled, grad.shape.type));
    Value finite = b.op("stablehlo.is_finite", {g}, Shape{ElementType::kPred, g.shape.dims});
    Value bad = convert(b, unary(b, "stablehlo.not", finite), ElementType::kF32);
    Dims all(grad.shape.dims.size());
    for (size_t d = 0; d < all.size(); ++d) all[d] = static_cast<int64_t>(d);
    Value any = reduce(b, bad, all, constant(b, ElementType::kF32, 0), "stablehlo.maximum");
    found = binary(b, "stablehlo.maximum", found, any);
  }
  results.push_back(
      convert(b, reshape(b, found, found_inf.shape.dims), found_inf.shape.type));
  return results;
}

// _amp_update_scale_: operands [scale, growth_tracker, found_inf, growth_factor, backoff_factor],
// attribute growth_interval. After an inf or NaN the scale backs off and the count of good steps
// restarts; after growth_interval good steps in a row the scale grows (unless that overflows)
// and the count restarts. Results: the new scale and the new count.
Values update_scale(FunctionBuilder& b, const Values& operands, const Attrs& attrs) {
  const Value& scale = operands[0];
  const Value& tracker = operands[1];
  Dims dims = scale.shape.dims;
  ElementType st = scale.shape.type, tt = tracker.shape.type;
  Value zero_count = full(b, tt, tracker.shape.dims, 0);
  Value found = compare(b, reshape(b, convert(b, operands[2], ElementType::kF32), dims),
                        full(b, ElementType::kF32, dims, 0), "NE");
  Value growth = splat(b, operands[3], st, dims), backoff = splat(b, operands[4], st, dims);
  Value counted = binary(b, "stablehlo.add", tracker, full(b, tt, tracker.shape.dims, 1));
  Value due = compare(b, counted, full(b, tt, tracker.shape.dims, attrs.i("growth_interval")),
                      "EQ");
  Value grown = binary(b, "stablehlo.multiply", scale, growth);
  Value finite = b.op("stablehlo.is_finite", {grown}, Shape{ElementType::kPred, dims});
  Value kept = select(b, binary(b, "stablehlo.and", reshape(b, due, dims), finite), grown, scale);
  Value new_scale = select(b, found, binary(b, "stablehlo.multiply", scale, backoff), kept);
  Value restart = binary(b, "stablehlo.or", reshape(b, found, tracker.shape.dims), due);
  Value new_count = select(b, restart, zero_count, counted);
  return {new_scale, new_count};
}

}  // namespace

void register_amp_rules(Registry& r) {
  r.add("amp_non_finite_check_and_unscale", non_finite_check_and_unscale);
  r.add("amp_update_scale", update_scale);
}

}  // namespace torchtpu::lowering
