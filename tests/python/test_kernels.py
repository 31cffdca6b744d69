"""torchtpu.kernels: JAX functions and Pallas kernels as PyTorch ops on tpu, against PyTorch's own
ops on the CPU, in every eager mode, under autograd and torch.compile."""

import pytest
import torch
from conftest import OpLog

import torchtpu

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax.experimental import pallas as pl  # noqa: E402

from torchtpu.kernels import jax_op  # noqa: E402


def _rand(*shape, dtype=torch.float32, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@jax_op
def tanh_matmul_softmax(x, y):
    return jax.nn.softmax(jnp.tanh(x) @ y + 1.0, axis=-1)


def _reference(x, y):
    return torch.softmax(torch.tanh(x) @ y + 1.0, -1)


def test_forward_in_every_mode(each_eager_mode):
    x, y = _rand(4, 8), _rand(8, 3, seed=1)
    got = tanh_matmul_softmax(x.to("tpu"), y.to("tpu"))
    assert got.device.type == "tpu" and got.dtype == torch.float32 and got.shape == (4, 3)
    torch.testing.assert_close(got.cpu(), _reference(x, y))


def test_cpu_tensors_run_in_jax_on_the_host():
    x, y = _rand(4, 8), _rand(8, 3, seed=1)
    got = tanh_matmul_softmax(x, y)
    assert got.device.type == "cpu"
    torch.testing.assert_close(got, _reference(x, y))


def test_non_contiguous_inputs():
    x = _rand(8, 4).t()  # (4, 8), strides (1, 4)
    y = _rand(3, 8, seed=1).t()
    torch.testing.assert_close(tanh_matmul_softmax(x.to("tpu"), y.to("tpu")).cpu(),
                               _reference(x, y))
    big = _rand(6, 8, seed=2).to("tpu")
    torch.testing.assert_close(tanh_matmul_softmax(big[1:5], y.to("tpu")).cpu(),
                               _reference(big[1:5].cpu(), y))


def test_fuses_with_the_ops_around_it_in_defer_and_fuse():
    x, y = _rand(4, 8), _rand(8, 3, seed=1)
    with torchtpu.eager_mode("defer_and_fuse"):
        torch.tpu.synchronize()
        before = torchtpu.metrics()["deferred_flushes"]
        got = (tanh_matmul_softmax(x.to("tpu") * 2, y.to("tpu")) + 1).sum(0).cpu()
        assert torchtpu.metrics()["deferred_flushes"] == before + 1  # one program for it all
    torch.testing.assert_close(got, (_reference(2 * x, y) + 1).sum(0))


def test_one_executable_per_signature_in_strict(strict_mode):
    x, y = _rand(4, 8).to("tpu"), _rand(8, 3, seed=1).to("tpu")
    tanh_matmul_softmax(x, y).cpu()
    before = torchtpu.metrics()
    for _ in range(3):
        tanh_matmul_softmax(x, y)
    after = torchtpu.metrics()
    assert after["executables_compiled"] == before["executables_compiled"]
    assert after["executable_cache_hits"] == before["executable_cache_hits"] + 3


def test_outputs_are_the_only_memory_it_takes(strict_mode):
    x, y = _rand(256, 64).to("tpu"), _rand(64, 32, seed=1).to("tpu")
    tanh_matmul_softmax(x, y).cpu()
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    out = tanh_matmul_softmax(x, y)
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() - before == out.numel() * 4
    assert torch.tpu.max_memory_allocated() - before == out.numel() * 4  # no copy of an input


@jax_op(static_argnames=("axis", "scale"))
def scaled_logsumexp(x, axis, scale):
    return jax.nn.logsumexp(x * scale, axis=axis)


def test_static_arguments_are_exported_per_value():
    x = _rand(5, 6)
    for axis, scale in [(0, 1.0), (1, 2.5), (0, 1.0)]:
        got = scaled_logsumexp(x.to("tpu"), axis=axis, scale=scale)
        torch.testing.assert_close(got.cpu(), torch.logsumexp(x * scale, axis))
    assert len(scaled_logsumexp._exports) == 2


@jax_op
def split_stats(x, counts):
    return jnp.mean(x, axis=0), jnp.max(x, axis=0), counts * 2


def test_several_outputs_and_integer_inputs(each_eager_mode):
    x, counts = _rand(7, 3), torch.arange(6, dtype=torch.int32)
    mean, top, doubled = split_stats(x.to("tpu"), counts.to("tpu"))
    torch.testing.assert_close(mean.cpu(), x.mean(0))
    assert torch.equal(top.cpu(), x.max(0).values)
    assert doubled.dtype == torch.int32 and torch.equal(doubled.cpu(), counts * 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64, torch.bool])
def test_dtypes(dtype):
    f = jax_op(lambda x: x + x if x.dtype != jnp.bool_ else ~x, name=f"twice_{str(dtype)[6:]}")
    x = (_rand(9) * 3).to(dtype)
    got = f(x.to("tpu"))
    assert got.dtype == dtype
    assert torch.equal(got.cpu(), x + x if dtype != torch.bool else ~x)


def test_nan_and_empty_inputs():
    x = torch.tensor([[1.0, float("nan")], [float("inf"), -1.0]])
    torch.testing.assert_close(tanh_matmul_softmax(x.to("tpu"), torch.eye(2, device="tpu")).cpu(),
                               _reference(x, torch.eye(2)), equal_nan=True)
    empty = tanh_matmul_softmax(torch.zeros(0, 8, device="tpu"), torch.zeros(8, 3, device="tpu"))
    assert empty.shape == (0, 3) and empty.device.type == "tpu"


def test_gradients_are_jax_vjp_and_pass_gradcheck():
    x = _rand(3, 4, dtype=torch.float64).to("tpu").requires_grad_()
    y = _rand(4, 2, dtype=torch.float64, seed=1).to("tpu").requires_grad_()
    assert torch.autograd.gradcheck(tanh_matmul_softmax, (x, y))
    a, b = x.detach().cpu().requires_grad_(), y.detach().cpu().requires_grad_()
    _reference(a, b).pow(2).sum().backward()
    tanh_matmul_softmax(x, y).pow(2).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), a.grad)
    torch.testing.assert_close(y.grad.cpu(), b.grad)


def test_gradients_of_one_of_several_outputs():
    x = _rand(7, 3).to("tpu").requires_grad_()
    mean, _, _ = split_stats(x, torch.arange(6, dtype=torch.int32, device="tpu"))
    mean.sum().backward()  # the other outputs get no gradient
    torch.testing.assert_close(x.grad.cpu(), torch.full((7, 3), 1 / 7))


def test_a_given_backward_is_used():
    calls = []

    def backward(x, grad):
        calls.append(1)
        return grad * 3

    triple_grad = jax_op(lambda x: x * 2.0, name="triple_grad", backward=backward)
    x = _rand(4).to("tpu").requires_grad_()
    triple_grad(x).sum().backward()
    assert calls and torch.equal(x.grad.cpu(), torch.full((4,), 3.0))


def test_without_gradients_it_still_goes_through_the_dispatcher():
    """Calls that want no gradient skip the autograd kernel, not the dispatcher (modes still see
    the op), and give outputs without a grad_fn."""
    x = _rand(4, 8).to("tpu").requires_grad_()
    y = _rand(8, 3, seed=1).to("tpu")
    with torch.no_grad(), OpLog() as log:
        got = tanh_matmul_softmax(x, y)
    assert str(tanh_matmul_softmax.op) in log.ops and not got.requires_grad
    assert tanh_matmul_softmax(x, y).grad_fn is not None


def test_opcheck():
    x, y = _rand(4, 8).requires_grad_(), _rand(8, 3, seed=1)
    torch.library.opcheck(tanh_matmul_softmax.op, ([x, y], ""))  # every check, on the CPU
    # On tpu every check but the autograd registration's, which PyTorch 2.13 runs only for
    # CPU/CUDA/XPU tensors ("NYI devices other than CPU/CUDA/XPU").
    tpu = [x.detach().to("tpu").requires_grad_(), y.to("tpu")]
    torch.library.opcheck(tanh_matmul_softmax.op, (tpu, ""), test_utils=(
        "test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_compiled_graph_holds_it_with_its_backward():
    """Traced without a graph break, and forward and backward each one replayed program."""
    torch._dynamo.reset()

    @torch.compile(backend="tpu", fullgraph=True)
    def step(x, y):
        return (tanh_matmul_softmax(x * 2, y) ** 2).sum()

    x = _rand(4, 8).to("tpu").requires_grad_()
    y = _rand(8, 3, seed=1).to("tpu")
    for _ in range(2):  # the same step as the measured one, so its eager ops repeat too
        x.grad = None
        step(x, y).backward()
    before = torchtpu.metrics()
    x.grad = None
    loss = step(x, y)
    loss.backward()
    after = torchtpu.metrics()
    assert after["compiled_replays"] == before["compiled_replays"] + 2
    assert after["compiled_eager_runs"] == before["compiled_eager_runs"]
    assert after["executable_cache_misses"] == before["executable_cache_misses"]
    a = _rand(4, 8).requires_grad_()
    expected = (_reference(a * 2, y.cpu()) ** 2).sum()
    expected.backward()
    torch.testing.assert_close(loss.detach().cpu(), expected.detach())
    torch.testing.assert_close(x.grad.cpu(), a.grad)


# ----------------------------------------------------------------------------------------------
# Pallas: interpret mode on the CPU plugin, chosen by torchtpu


def _softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


@jax_op
def pallas_softmax(x):
    rows = 8
    return pl.pallas_call(_softmax_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // rows,),
                          in_specs=[pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
                          out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)))(x)


def test_pallas_kernel_runs_in_every_mode(each_eager_mode):
    x = _rand(32, 128)
    torch.testing.assert_close(pallas_softmax(x.to("tpu")).cpu(), torch.softmax(x, -1))


# ----------------------------------------------------------------------------------------------
# Errors: one clear error naming the function and the cause


def test_function_with_side_effects_is_refused():
    @jax_op
    def noisy(x):
        jax.debug.print("x = {}", x)
        return x + 1

    with pytest.raises(RuntimeError, match="noisy.*side effects|cannot export noisy"):
        noisy(torch.ones(2, device="tpu"))


def test_data_dependent_shape_is_refused():
    @jax_op
    def nonzero(x):
        return jnp.nonzero(x)[0]

    with pytest.raises(RuntimeError, match="cannot export nonzero.*float32\\[5\\]"):
        nonzero(torch.ones(5, device="tpu"))


def test_dtype_jax_lacks_is_refused():
    # Every dtype a tpu tensor can have, JAX has; a CPU tensor can have others.
    with pytest.raises(TypeError, match="tanh_matmul_softmax.*JAX has no dtype for torch.complex32"):
        tanh_matmul_softmax(torch.zeros(2, 2, dtype=torch.complex32), torch.zeros(2, 2))


def test_wrong_arguments_are_refused():
    with pytest.raises(TypeError, match="argument 1 is a float"):
        tanh_matmul_softmax(torch.ones(2, 2, device="tpu"), 3.0)
    with pytest.raises(TypeError, match="not static arguments"):
        scaled_logsumexp(torch.ones(2, device="tpu"), axis=0, scale=1.0, bogus=1)
    with pytest.raises(TypeError, match="wraps a function"):
        jax_op(3)


def test_modes_and_the_profiler_see_the_op():
    """A call needing no gradient goes straight to the tpu kernel only where nothing would see the
    op in the dispatcher: a dispatch mode and the profiler still see it."""
    triple = jax_op(lambda x: x * 3, name="seen_by_modes")
    x = torch.arange(4.0, device="tpu")
    with OpLog() as log:
        y = triple(x)
    assert "torchtpu.seen_by_modes.default" in log.ops
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        triple(x)
    assert any("seen_by_modes" in e.name for e in prof.events())
    assert y.cpu().tolist() == triple(x).cpu().tolist() == [0.0, 3.0, 6.0, 9.0]


def test_plain_calls_skip_the_python_kernel_and_keep_their_values(monkeypatch):
    """After the first call of a signature, a call with plain tpu tensors needing no gradient runs
    from C++ (the Python kernel, which calls _C._call_module, is not entered); an input the module
    drops, a Parameter, no_grad, a new signature and a tuple result all keep PyTorch's values."""
    first_and_sum = jax_op(lambda x, unused: (x * 2, jnp.sum(x)), name="first_and_sum")
    x, unused = torch.arange(6.0).reshape(2, 3), torch.ones(4)
    expected = (x * 2, x.sum())
    first = first_and_sum(x.to("tpu"), unused.to("tpu"))
    entered = []
    original = torchtpu._C._call_module
    monkeypatch.setattr(torchtpu._C, "_call_module", lambda *a: entered.append(a) or original(*a))
    again = first_and_sum(x.to("tpu"), unused.to("tpu"))
    assert entered == []
    weight = torch.nn.Parameter(x.to("tpu"))
    with torch.no_grad():
        from_parameter = first_and_sum(weight, unused.to("tpu"))
    assert entered == []
    grown = first_and_sum(torch.ones(3, 3, device="tpu"), unused.to("tpu"))  # a new signature
    assert len(entered) == 1
    with_grad = first_and_sum(weight, unused.to("tpu"))  # through autograd
    assert len(entered) == 2 and with_grad[0].requires_grad
    for result in (first, again, from_parameter, with_grad):
        assert isinstance(result, tuple) and len(result) == 2
        torch.testing.assert_close(result[0].detach().cpu(), expected[0])
        torch.testing.assert_close(result[1].detach().cpu(), expected[1])
    torch.testing.assert_close(grown[1].cpu(), torch.tensor(9.0))


def test_vmap_goes_through_the_dispatcher():
    """Under torch.vmap a call is not a plain one: it goes to the dispatcher, which has no batching
    rule for the op and says so, as for any op without one (never a result computed on the
    batched tensor as if it were plain)."""
    double = jax_op(lambda x: x * 2 + 1, name="double_under_vmap")
    x = torch.arange(12.0).reshape(4, 3)
    double(x[0].to("tpu"))  # the per-sample signature, exported
    double(x.to("tpu"))  # and the batch's
    with pytest.raises(RuntimeError, match="Batching rule not implemented for torchtpu::double"):
        torch.vmap(double)(x.to("tpu"))
