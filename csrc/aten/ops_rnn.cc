// The fused LSTM and GRU cells. PyTorch's recurrent layers (nn.LSTM, nn.GRU, LSTMCell, GRUCell)
// call `_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell` for every step on a PrivateUse1 device, as
// on CUDA; the CPU has no kernel for them, so the fallback could not run them. Here each cell is
// its math in ATen ops, registered for autograd too, so the ops' gradients are recorded as they
// run (the ops' own backward, `_thnn_fused_*_backward*`, is the CUDA workspace's and unused).
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/tanh.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

namespace torchtpu::aten {
namespace {

// The gates of one side with its bias, if any.
at::Tensor biased(const at::Tensor& gates, const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? gates + *bias : gates;
}

// (input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace): the gates
// in, forget, cell, out along dim 1; the workspace holds the activated gates, as CUDA's does.
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(
    const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& cx,
    const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  at::Tensor gates = biased(input_gates, input_bias) + biased(hidden_gates, hidden_bias);
  std::vector<at::Tensor> g = gates.chunk(4, 1);
  at::Tensor in = at::sigmoid(g[0]), forget = at::sigmoid(g[1]), cell = at::tanh(g[2]),
             out = at::sigmoid(g[3]);
  at::Tensor cy = forget * cx + in * cell;
  at::Tensor hy = out * at::tanh(cy);
  return {hy, cy, at::cat({in, forget, cell, out}, 1)};
}

// (input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace): the gates reset,
// update, new along dim 1; the workspace holds reset, update, new, hx and the hidden side's new
// gate, as CUDA's does.
std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates,
                                            const at::Tensor& hidden_gates, const at::Tensor& hx,
                                            const std::optional<at::Tensor>& input_bias,
                                            const std::optional<at::Tensor>& hidden_bias) {
  std::vector<at::Tensor> i = biased(input_gates, input_bias).chunk(3, 1);
  std::vector<at::Tensor> h = biased(hidden_gates, hidden_bias).chunk(3, 1);
  at::Tensor reset = at::sigmoid(i[0] + h[0]), update = at::sigmoid(i[1] + h[1]);
  at::Tensor fresh = at::tanh(i[2] + reset * h[2]);
  at::Tensor hy = (hx - fresh) * update + fresh;
  return {hy, at::cat({reset, update, fresh, hx, h[2]}, 1)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(lstm_cell));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(gru_cell));
}

}  // namespace torchtpu::aten
