// torch._assert_async (what torch._check and traced asserts become): CUDA's device-side assert.
// The CPU checks the value at once; on tpu, as on CUDA, nothing waits: the program records a
// device-side check (engine/device_asserts.h), raised with the CPU's message at the next wait.
#include <ATen/ops/eq.h>

#include <string>

#include "aten/ops.h"
#include "aten/tensor_view.h"
#include "aten/value_checks.h"
#include "engine/eager.h"

namespace torchtpu::aten {

void assert_zero(const char* op, const std::vector<std::pair<at::Tensor, std::string>>& flags) {
  std::vector<IndexAssert> asserts = zero_asserts(op, flags);
  if (asserts.empty()) return;  // TORCHTPU_INDEX_CHECKS=0
  engine::Recording recording(asserts[0].index.device().index());
  record_index_asserts(recording.program(), asserts);
  recording.finish();
}

void assert_async_msg(const at::Tensor& self, c10::string_view assert_msg) {
  // The CPU's checks of the shape, with its messages (at::native::is_nonzero).
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  std::string message = assert_msg.empty() ? "Assertion is failed" : std::string(assert_msg);
  assert_zero("aten::_assert_async", {{at::eq(self, 0), message}});
}

void assert_async(const at::Tensor& self) {
  assert_async_msg(self, "Expected Tensor with single nonzero value, but got zero");
}

}  // namespace torchtpu::aten
