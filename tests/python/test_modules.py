"""PyTorch's ModuleInfo database (module_db) on "tpu" against the CPU: every torch.nn module.

Each ModuleInfo gets one test: its first SAMPLES inputs (constructor and forward arguments, as
PyTorch's own module tests make them, float32) build one module, copied to the CPU and to "tpu";
both run the forward in training mode (and in eval mode where the module's ModuleInfo says the
two differ), and the outputs, the buffers after the forward (batch norm's running statistics),
and the gradients of a weighted sum of the floating outputs with respect to the parameters and
the inputs must match, with no op on the CPU fallback.

This found nn.LSTM, nn.GRU, LSTMCell and GRUCell raising NotImplementedError on tpu (their fused
cells have no CPU kernel, so the fallback had nothing to run), FractionalMaxPool3d's backward
failing (no meta function), and two silent wrong gradients: log_softmax of a 0-d tensor, and
cross-entropy whose every target is ignored.
"""

import copy

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_map

import torchtpu
from test_opinfo import _load_op_db

_load_op_db()  # installs the expecttest stand-in that torch.testing._internal imports
from torch.testing._internal.common_modules import module_db  # noqa: E402

SAMPLES = 2


def _to(device):
    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.detach().to(device).requires_grad_(t.requires_grad)
    return move


def _run(module, args, kwargs, device):
    """The module's outputs, its buffers afterwards, and the gradients of a weighted sum of its
    floating outputs (weights 1, 2, 3, ... cycling, so a transposed gradient shows) with respect
    to its parameters and its inputs, all on the CPU."""
    module = copy.deepcopy(module).to(device)
    args, kwargs = tree_map(_to(device), args), tree_map(_to(device), kwargs)
    torch.manual_seed(0)
    out = module(*args, **kwargs)
    flat = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    graded = [t for t in flat if t.requires_grad and t.dtype.is_floating_point]
    grads = []
    if graded:
        loss = sum((t * (1 + torch.arange(t.numel(), device=device).reshape(t.shape) % 3)).sum()
                   for t in graded)
        leaves = [p for p in module.parameters() if p.requires_grad]
        leaves += [t for t in tree_flatten((args, kwargs))[0]
                   if isinstance(t, torch.Tensor) and t.requires_grad]
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    # The sums read each result (an empty tensor's copy to the host runs no program).
    sums = [(t.abs() if t.is_complex() else t).detach().double().sum() for t in flat + list(grads)
            if t is not None]
    return ([t.detach().cpu() for t in flat + sums], [b.cpu() for b in module.buffers()],
            [g if g is None else g.cpu() for g in grads])


def _is_lazy(module):
    return any(isinstance(p, torch.nn.parameter.UninitializedParameter)
               for p in module.parameters())


@pytest.mark.parametrize("info", module_db, ids=lambda info: info.module_cls.__name__)
def test_module_matches_cpu(info):
    before = dict(torchtpu.metrics()["cpu_fallbacks"])
    for training in (True, False) if info.train_and_eval_differ else (True,):
        inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                         requires_grad=True, training=training)
        for k, sample in enumerate(inputs[:SAMPLES]):
            if sample.forward_input is None:
                continue
            torch.manual_seed(0)
            module = info.module_cls(*sample.constructor_input.args,
                                     **sample.constructor_input.kwargs).to(torch.float32)
            module.train(training)
            args, kwargs = sample.forward_input.args, sample.forward_input.kwargs
            if _is_lazy(module):  # its parameters take their shapes (and values) on the CPU
                with torch.no_grad():
                    module(*args, **kwargs)
            expected, got = _run(module, args, kwargs, "cpu"), _run(module, args, kwargs, "tpu")
            where = f"sample {k}, {'training' if training else 'eval'}"
            for what, e_list, g_list, tol in zip(("output", "buffer", "gradient"), expected, got,
                                                 (1e-4, 1e-4, 1e-3)):
                assert len(e_list) == len(g_list), f"{where}: {what}s"
                for e, g in zip(e_list, g_list):
                    assert (e is None) == (g is None), f"{where}: {what}"
                    if e is not None:
                        torch.testing.assert_close(g, e, rtol=tol, atol=tol, equal_nan=True,
                                                   msg=lambda m, w=what: f"{where}, {w}: {m}")
    fell_back = {op for op, n in torchtpu.metrics()["cpu_fallbacks"].items()
                 if n != before.get(op, 0)}
    assert not fell_back, f"ops on the CPU fallback: {fell_back}"


def _empty_batch(t):
    if not isinstance(t, torch.Tensor) or t.dim() < 2:
        return t
    return t[:0].detach().requires_grad_(t.requires_grad)


@pytest.mark.parametrize("info", module_db, ids=lambda info: info.module_cls.__name__)
def test_module_on_an_empty_batch(info):
    """The first input with its batch dimension (of inputs of two or more dimensions) empty: what
    the CPU gives (or raises), with every result read on the device. This found MSELoss,
    HuberLoss and SmoothL1Loss raising ZeroDivisionError on tpu in their backward."""
    inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float32, requires_grad=True,
                                     training=True)
    sample = next((s for s in inputs if s.forward_input is not None), None)
    if sample is None:
        pytest.skip("no forward input")
    torch.manual_seed(0)
    module = info.module_cls(*sample.constructor_input.args, **sample.constructor_input.kwargs)
    if _is_lazy(module):
        pytest.skip("a lazy module takes its shapes from its first input")
    args = tree_map(_empty_batch, sample.forward_input.args)
    kwargs = tree_map(_empty_batch, sample.forward_input.kwargs)
    outcomes = []
    for device in ("cpu", "tpu"):
        try:
            outcomes.append(_run(module, args, kwargs, device))
        except Exception as e:  # noqa: BLE001 - the CPU's exception type is the expected one
            outcomes.append(type(e))
    expected, got = outcomes
    if isinstance(expected, type):
        assert got is expected, f"cpu raised {expected}, tpu gave {got}"
        return
    assert not isinstance(got, type), f"cpu returned, tpu raised {got}"
    for e_list, g_list in zip(expected, got):
        for e, g in zip(e_list, g_list):
            assert (e is None) == (g is None)
            if e is not None:
                assert e.shape == g.shape and e.dtype == g.dtype
                torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-4, equal_nan=True)
