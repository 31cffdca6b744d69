// The glue of torchtpu.kernels: a call of an exported StableHLO module (a JAX function, a Pallas
// kernel) on tpu tensors, recorded as one "call_module" op like any other, so it runs as its own
// program in Strict, joins the pending program in DeferAndFuse and the captured one under
// torch.compile, reading and writing device buffers in place: no copy.
#include <c10/util/irange.h>

#include <string>
#include <vector>

#include "aten/ops.h"
#include "aten/tensor_view.h"
#include "engine/eager.h"
#include "lowering/inline_module.h"

namespace torchtpu::aten {

void call_module(const std::string& entry, const std::vector<at::Tensor>& inputs,
                 const std::vector<at::Tensor>& outputs) {
  TORCH_CHECK(lowering::has_inlined_module(entry), "torchtpu: no module registered as @", entry);
  std::vector<const at::Tensor*> all;
  for (const auto& t : inputs) all.push_back(&t);
  for (const auto& t : outputs) all.push_back(&t);
  TORCH_CHECK(!all.empty(), "torchtpu: a module call needs a tensor");
  c10::Device device = common_device_of(all);
  TORCH_CHECK(device.is_privateuseone(), "torchtpu: a module call takes tpu tensors, got ",
              device);
  if (outputs.empty()) return;
  engine::Recording recording(device.index());
  engine::Program& p = recording.program();
  std::vector<int> operands;
  for (const auto& t : inputs) operands.push_back(p.read(view_of(t)));
  lowering::Attrs attrs;
  attrs.set("entry", entry).set("outputs", static_cast<int64_t>(outputs.size()));
  for (const auto k : c10::irange(outputs.size())) {
    std::string suffix = k == 0 ? "" : std::to_string(k);
    const at::Tensor& out = outputs[k];
    attrs.set_type("type" + suffix, element_type(out.scalar_type()))
        .set("shape" + suffix, std::vector<int64_t>(out.sizes().begin(), out.sizes().end()));
  }
  int first = p.apply("call_module", std::move(operands), std::move(attrs),
                      static_cast<int>(outputs.size()));
  for (const auto k : c10::irange(outputs.size())) {
    p.write(view_of(outputs[k]), first + static_cast<int>(k));
  }
  recording.finish();
}

}  // namespace torchtpu::aten
