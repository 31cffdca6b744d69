"""Mixed precision on "tpu": torch.autocast's cast policy (low precision for matmuls, float32 for
softmax, norms, losses and reductions, the widest type for ops mixing inputs), its default dtype
in every thread, and torch.amp.GradScaler's device steps. Everything must run on the device."""

import importlib.util
import os
import threading

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO, sample

import torchtpu

LOW = [torch.bfloat16, torch.float16]


def tpu(*shape, seed=0, dtype=torch.float32):
    return sample(shape, dtype, seed).to("tpu")


# --- the default dtype, per thread -------------------------------------------------------------


def in_new_thread(fn):
    result = []
    t = threading.Thread(target=lambda: result.append(fn()))
    t.start()
    t.join()
    return result[0]


def test_default_dtype_is_bfloat16_in_every_thread():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert in_new_thread(lambda: torch.get_autocast_dtype("tpu")) == torch.bfloat16

    def mm_in_autocast():
        with torch.autocast("tpu"):
            return (tpu(4, 4) @ tpu(4, 4)).dtype

    assert in_new_thread(mm_in_autocast) == torch.bfloat16


def test_a_threads_own_choice_holds_and_stays_in_that_thread():
    def choose():
        torch.set_autocast_dtype("tpu", torch.float16)
        with torch.autocast("tpu"):
            return torch.get_autocast_dtype("tpu"), (tpu(4, 4) @ tpu(4, 4)).dtype

    assert in_new_thread(choose) == (torch.float16, torch.float16)
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16


def test_amp_availability():
    assert torch.amp.is_autocast_available("tpu")
    assert set(torch.tpu.get_amp_supported_dtype()) == {torch.bfloat16, torch.float16}
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
    assert not torch.is_autocast_enabled("tpu")


# --- the cast policy ---------------------------------------------------------------------------

# name -> (fn of tpu/cpu tensors, input shapes, the result dtype under autocast: None = the
# autocast dtype)
LOW_PRECISION = {
    "mm": (lambda a, b: a @ b, [(8, 16), (16, 4)]),
    "bmm": (torch.bmm, [(2, 8, 16), (2, 16, 4)]),
    "addmm": (torch.addmm, [(4,), (8, 16), (16, 4)]),
    "baddbmm": (torch.baddbmm, [(2, 8, 4), (2, 8, 16), (2, 16, 4)]),
    "linear": (F.linear, [(3, 8, 16), (4, 16), (4,)]),
    "conv2d": (F.conv2d, [(2, 3, 8, 8), (4, 3, 3, 3)]),
    "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
             [(2, 2, 8, 16)] * 3),
    "einsum": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 8, 16), (2, 16, 4)]),
}
FLOAT32 = {
    "softmax": (lambda x: torch.softmax(x, -1), [(4, 16)]),
    "log_softmax": (lambda x: F.log_softmax(x, -1), [(4, 16)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (16,), w, b), [(4, 16), (16,), (16,)]),
    "group_norm": (lambda x: F.group_norm(x, 2), [(2, 4, 5)]),
    "batch_norm": (lambda x: F.batch_norm(x, None, None, training=True), [(4, 3, 5)]),
    "sum": (torch.sum, [(4, 16)]),
    "cumsum": (lambda x: torch.cumsum(x, 1), [(4, 16)]),
    "exp": (torch.exp, [(4, 16)]),
    "log": (torch.log, [(4, 16)]),
    "pow": (lambda x: torch.pow(x, 2), [(4, 16)]),
    "mse_loss": (F.mse_loss, [(4, 16), (4, 16)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, torch.arange(4, device=x.device)), [(4, 16)]),
}


def autocast_result(fn, shapes, device, low, inputs_dtype=torch.float32):
    args = [sample(s, inputs_dtype, seed=i).to(device) for i, s in enumerate(shapes)]
    with torch.autocast(device, dtype=low):
        return fn(*args)


def reference(fn, shapes, dtype):
    """The op on the CPU with its inputs cast to `dtype` first, computed in that dtype."""
    return fn(*[sample(s, torch.float32, seed=i).to(dtype) for i, s in enumerate(shapes)])


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(LOW_PRECISION))
def test_matmuls_run_in_low_precision(name, low, each_eager_mode, fallback_error):
    fn, shapes = LOW_PRECISION[name]
    out = autocast_result(fn, shapes, "tpu", low)
    assert out.dtype == low
    expected = reference(fn, shapes, low)
    torch.testing.assert_close(out.cpu(), expected, atol=2e-2 * expected.abs().max().item(),
                               rtol=2e-2)


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("name", sorted(FLOAT32))
def test_softmax_norms_losses_reductions_run_in_float32(name, low, each_eager_mode,
                                                        fallback_error):
    fn, shapes = FLOAT32[name]
    # Low-precision inputs, as a preceding matmul would give them: computed in float32.
    args = [sample(s, torch.float32, seed=i).to(low) for i, s in enumerate(shapes)]
    with torch.autocast("tpu", dtype=low):
        out = fn(*[a.to("tpu") for a in args])
    assert out.dtype == torch.float32
    expected = fn(*[a.float() for a in args])
    torch.testing.assert_close(out.cpu(), expected, atol=1e-4, rtol=1e-4, equal_nan=True)


@pytest.mark.parametrize("name", ["cat", "stack", "addcmul", "index_put"])
def test_ops_mixing_inputs_run_in_the_widest_type(name, fallback_error):
    a, b = tpu(4, 4), tpu(4, 4, seed=1).bfloat16()
    with torch.autocast("tpu"):
        if name == "cat":
            out = torch.cat([b, a])
        elif name == "stack":
            out = torch.stack([b, a])
        elif name == "addcmul":
            out = torch.addcmul(b, a, b)
        else:
            out = b.index_put((torch.tensor([0, 2], device="tpu"),), a[:2])
    assert out.dtype == torch.float32


def test_ops_outside_the_lists_and_ineligible_inputs_keep_their_dtype(fallback_error):
    with torch.autocast("tpu"):
        assert (tpu(4, 4) + tpu(4, 4)).dtype == torch.float32  # not listed: falls through
        assert torch.relu(tpu(4, 4)).reshape(16).dtype == torch.float32
        a = tpu(4, 4, dtype=torch.float64)
        assert (a @ a).dtype == torch.float64  # float64 is never autocast
        i = tpu(4, 4, dtype=torch.int64)
        assert (i @ i).dtype == torch.int64
        # An explicit dtype wins over the float32 policy.
        assert torch.softmax(tpu(4, 4).bfloat16(), 0, dtype=torch.bfloat16).dtype == torch.bfloat16
    with torch.autocast("tpu", enabled=False):
        assert (tpu(4, 4) @ tpu(4, 4)).dtype == torch.float32


def test_binary_cross_entropy_is_refused_as_on_cuda():
    p = torch.sigmoid(tpu(4))
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, torch.ones(4, device="tpu"))


def test_gradients_of_float32_weights_are_float32(each_eager_mode, fallback_error):
    w = tpu(16, 4).requires_grad_()
    x = tpu(8, 16, seed=1)
    with torch.autocast("tpu"):
        y = x @ w
        loss = torch.log_softmax(y, -1).sum()
    assert y.dtype == torch.bfloat16 and loss.dtype == torch.float32
    loss.backward()
    assert w.grad.dtype == torch.float32
    wc = w.detach().cpu().requires_grad_()
    torch.log_softmax(x.cpu().bfloat16() @ wc.bfloat16(), -1).float().sum().backward()
    torch.testing.assert_close(w.grad.cpu(), wc.grad, atol=5e-2, rtol=2e-2)


def test_compiled_function_under_autocast(fallback_error):
    def f(x, w):
        y = x @ w
        return y, torch.softmax(y, -1)

    compiled = torch.compile(f, backend="tpu")
    x, w = tpu(8, 16), tpu(16, 4, seed=1)
    with torch.autocast("tpu"):
        y, p = compiled(x, w)
    assert y.dtype == torch.bfloat16 and p.dtype == torch.float32
    expected = x.cpu().bfloat16() @ w.cpu().bfloat16()
    torch.testing.assert_close(y.cpu(), expected)
    torch.testing.assert_close(p.cpu(), torch.softmax(expected.float(), -1), atol=1e-3, rtol=1e-3)
    y32, _ = compiled(x, w)  # outside autocast: recompiled in float32, not the bf16 graph
    assert y32.dtype == torch.float32


def test_autocast_inside_a_compiled_function(fallback_error):
    def f(x, w):
        with torch.autocast("tpu"):
            return torch.softmax(x @ w, -1), (x @ w).dtype

    p, dtype = torch.compile(f, backend="tpu")(tpu(8, 16), tpu(16, 4, seed=1))
    assert dtype == torch.bfloat16 and p.dtype == torch.float32


# --- GradScaler ------------------------------------------------------------------------------


def unscale(grads, scale, found):
    found_inf = torch.full((1,), found, device=grads[0].device)
    inv_scale = torch.full((1,), 1 / scale, device=grads[0].device)
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    return [g.cpu() for g in grads], found_inf.cpu()


@pytest.mark.parametrize("bad", [None, float("inf"), float("-inf"), float("nan")])
def test_unscale_matches_cpu_and_notes_inf_and_nan(bad, each_eager_mode, fallback_error):
    def grads(device):
        gs = [sample((5, 3), torch.float32, 1) * 1024, sample((7,), torch.float16, 2) * 64,
              sample((2, 2), torch.bfloat16, 3)]
        if bad is not None:
            gs[1][3] = bad
        return [g.to(device) for g in gs]

    for found in (0.0, 1.0):
        got = unscale(grads("tpu"), 512.0, found)
        expected = unscale(grads("cpu"), 512.0, found)
        for g, e in zip(got[0], expected[0]):
            torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)
        assert got[1].item() == expected[1].item() == (1.0 if bad is not None or found else 0.0)


def test_unscale_checks_its_arguments_as_the_cpu_does():
    g = [tpu(3)]
    with pytest.raises(RuntimeError, match="inv_scale must be a 1-element tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, tpu(1), tpu(2))
    with pytest.raises(RuntimeError, match="found_inf must be a float tensor"):
        torch._amp_foreach_non_finite_check_and_unscale_(g, tpu(1, dtype=torch.int32), tpu(1))


@pytest.mark.parametrize("found", [0.0, 1.0])
@pytest.mark.parametrize("tracker", [0, 2, 3])
def test_update_scale_matches_cpu(found, tracker, each_eager_mode, fallback_error):
    def run(device, start=1024.0):
        scale = torch.full((1,), start, device=device)
        growth = torch.full((1,), tracker, dtype=torch.int32, device=device)
        out = torch._amp_update_scale_(scale, growth, torch.full((1,), found, device=device),
                                       2.0, 0.5, 3)
        assert out is scale
        return scale.cpu(), growth.cpu()

    assert run("tpu") == run("cpu")
    # Growth that would overflow float32 keeps the scale (and still restarts the count).
    assert run("tpu", 3e38) == run("cpu", 3e38)


def scaler_run(device, grads_inf_at=(1,), steps=6):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=2)
    x = torch.randn(16, 8).to(device)
    scales, weights = [], []
    for step in range(steps):
        with torch.autocast(device, dtype=torch.float16):
            loss = model(x).float().pow(2).mean()
        if step in grads_inf_at:
            loss = loss * float("inf")
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
        weights.append(model.weight.detach().cpu().clone())
    return scales, weights


def test_grad_scaler_skips_overflowing_steps_and_grows_after_the_interval(each_eager_mode,
                                                                          fallback_error):
    scales, weights = scaler_run("tpu")
    # step 0 finite (1 good step), step 1 inf: halves and restarts; steps 2, 3 finite: doubles.
    assert scales == [2.0**10, 2.0**9, 2.0**9, 2.0**10, 2.0**10, 2.0**11]
    assert torch.equal(weights[1], weights[0])  # the overflowing step was skipped
    assert not torch.equal(weights[2], weights[1])
    cpu_scales, cpu_weights = scaler_run("cpu")
    assert scales == cpu_scales
    for w, c in zip(weights, cpu_weights):
        torch.testing.assert_close(w, c, atol=2e-3, rtol=2e-3)


# --- training ----------------------------------------------------------------------------------


def train_gpt():
    spec = importlib.util.spec_from_file_location("train_gpt",
                                                  os.path.join(REPO, "examples", "train_gpt.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STEPS = 25


@pytest.fixture(scope="module")
def float32_losses():
    return train_gpt().train("tpu", STEPS, batch=8, width=64, layers=2, progress=False)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compile"])
def test_bf16_training_follows_float32(mode, float32_losses, fallback_error):
    with torchtpu.eager_mode("strict" if mode == "compile" else mode):
        losses = train_gpt().train("tpu", STEPS, batch=8, width=64, layers=2, progress=False,
                                   compile=mode == "compile", amp="bf16")
    assert losses[-1] < 0.8 * losses[0]  # it learns
    for step in (0, STEPS - 1):
        assert abs(losses[step] - float32_losses[step]) <= 0.03 * float32_losses[step], (
            step, losses[step], float32_losses[step])
