"""torch.compile(backend="tpu"): results against eager tpu and CPU, replays, training, the compiled
optimizer, dynamic shapes, graph breaks, eager fallback with a warning, random numbers, input
mutation and aliasing, the debug dump, the cache across processes, and a graph split at its
collectives."""

import os
import warnings

import pytest
import torch
import torch._dynamo
from conftest import run_python

import torchtpu
import torchtpu._compile


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def stats_delta(before):
    now = torchtpu._compile.stats()
    return {k: now[k] - before[k] for k in now}


def no_eager_warning(caught):
    return [w for w in caught if "runs eagerly" in str(w.message)] == []


def test_function_matches_eager_and_cpu_and_replays():
    def f(x, y):
        return torch.nn.functional.gelu(x @ y + 1).sum(dim=0) * 2

    x, y = torch.randn(8, 16), torch.randn(16, 4)
    compiled = torch.compile(f, backend="tpu")
    before = torchtpu._compile.stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [compiled(x.to("tpu"), y.to("tpu")) for _ in range(3)]
    assert no_eager_warning(caught)
    d = stats_delta(before)
    assert d["compiled_captures"] == 1 and d["compiled_replays"] == 2
    assert d["compiled_eager_runs"] == 0
    for out in outs:
        assert out.device.type == "tpu"
        torch.testing.assert_close(out.cpu(), f(x, y))
        torch.testing.assert_close(out.cpu(), f(x.to("tpu"), y.to("tpu")).cpu())


def test_module_training_gradients_match_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                              torch.nn.Linear(32, 3))
    tpu = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.LayerNorm(32), torch.nn.GELU(),
                              torch.nn.Linear(32, 3))
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    for step in range(3):
        x, target = torch.randn(5, 12), torch.randint(0, 3, (5,))
        loss_cpu = torch.nn.functional.cross_entropy(cpu(x), target)
        loss_cpu.backward()
        loss = torch.nn.functional.cross_entropy(compiled(x.to("tpu")), target.to("tpu"))
        loss.backward()
        torch.testing.assert_close(loss.cpu(), loss_cpu)
        for p, q in zip(tpu.parameters(), cpu.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)
    assert torchtpu._compile.stats()["compiled_replays"] > 0


def test_compiled_optimizer_step_matches_eager():
    torch.manual_seed(0)
    params = [torch.randn(6, 4), torch.randn(4)]
    grads = [torch.randn(6, 4), torch.randn(4)]
    ref = [p.clone().requires_grad_() for p in params]
    dev = [p.to("tpu").requires_grad_() for p in params]
    opt_ref = torch.optim.AdamW(ref, lr=0.1, weight_decay=0.1)
    opt = torch.optim.AdamW(dev, lr=0.1, weight_decay=0.1, capturable=True)

    @torch.compile(backend="tpu")
    def step():
        opt.step()

    before = torchtpu._compile.stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            for p, q, g in zip(ref, dev, grads):
                p.grad, q.grad = g.clone(), g.to("tpu")
            opt_ref.step()
            step()
    assert no_eager_warning(caught)
    assert stats_delta(before)["compiled_replays"] >= 2
    for p, q in zip(ref, dev):
        # capturable=True computes the bias corrections on the device, in another order
        torch.testing.assert_close(q.detach().cpu(), p.detach(), rtol=1e-4, atol=1e-5)


def test_dynamic_shapes_run_in_buckets():
    def f(x):
        return (x * 2).softmax(dim=-1).sum(dim=0)

    compiled = torch.compile(f, backend="tpu")
    before = torchtpu._compile.stats()
    for n in (3, 5, 7, 5, 3):
        x = torch.randn(n, 6)
        torch.testing.assert_close(compiled(x.to("tpu")).cpu(), f(x))
    d = stats_delta(before)
    # Dynamo hands over a static graph for the first shape and one symbolic graph after the
    # second; that one captures once for the bucket of sizes up to 8 (at 5) and replays 7, 5, 3
    # (tests/python/test_buckets.py; with TORCHTPU_SHAPE_BUCKETS=0 it captures each size).
    assert d["compiled_graphs"] == 2
    assert d["compiled_captures"] == 2
    assert d["compiled_replays"] == 3
    assert d["compiled_bucketed_calls"] == 4
    assert d["compiled_eager_runs"] == 0


def test_a_graph_keeps_its_most_recent_programs_only(monkeypatch):
    """A graph run on ever new shapes (no buckets) keeps its 64 most recently run programs: an
    older shape is captured again when it comes back, with the same results."""
    monkeypatch.setenv("TORCHTPU_SHAPE_BUCKETS", "0")
    torch._dynamo.reset()

    def f(x):
        return x * 2 + 1

    compiled = torch.compile(f, backend="tpu")
    kept = 64  # CompiledGraph::kMaxPrograms
    before = torchtpu._compile.stats()
    for n in range(2, kept + 4):  # 2 exactly, then one symbolic graph capturing each size
        compiled(torch.ones(n, device="tpu"))
    for n in (kept + 3, 3, kept + 3):  # the newest replays; 3, the oldest, is captured again
        torch.testing.assert_close(compiled(torch.ones(n, device="tpu")).cpu(),
                                   torch.full((n,), 3.0))
    d = stats_delta(before)
    assert d["compiled_captures"] == kept + 2 + 1
    assert d["compiled_replays"] == 2
    torch._dynamo.reset()


def test_graph_break_runs_both_graphs():
    def f(x):
        y = x.sin() * 3
        print("graph break")
        return y.cos() + 1

    x = torch.randn(10)
    torch.testing.assert_close(torch.compile(f, backend="tpu")(x.to("tpu")).cpu(), f(x))


def test_unsupported_op_falls_back_to_eager_with_warning():
    def f(x):  # general eigenvalues run on the CPU fallback (XLA has no eig op)
        return torch.linalg.eigvals((x + 1).reshape(3, 3)).abs() * 2

    x = torch.randn(9)
    compiled = torch.compile(f, backend="tpu")
    with pytest.warns(UserWarning, match="runs eagerly.*eig"):
        out = compiled(x.to("tpu"))
    torch.testing.assert_close(out.cpu(), f(x))
    torch.testing.assert_close(compiled(x.to("tpu")).cpu(), f(x))  # and eagerly again


def test_cpu_scalar_inputs_are_program_arguments():
    """A 0-d CPU tensor input (a Python float Dynamo made a tensor, a model's CPU scalar) becomes
    a device argument, as Python scalars are in eager mode: new values replay the program."""
    def f(x, s):
        return x * s + 1

    compiled = torch.compile(f, backend="tpu")
    x = torch.randn(4)
    before = torchtpu._compile.stats()
    for v in (2.0, 3.0, -1.5, 0.25):
        torch.testing.assert_close(compiled(x.to("tpu"), torch.tensor(v)).cpu(),
                                   f(x, torch.tensor(v)))
    d = stats_delta(before)
    assert d["compiled_captures"] == 1 and d["compiled_replays"] == 3, d
    assert d["compiled_eager_runs"] == 0, d


def test_cpu_scalar_input_the_graph_writes_is_written_back():
    def f(x, s):
        s.add_(1)
        return x * s

    compiled = torch.compile(f, backend="tpu")
    s, s_ref = torch.tensor(1.0), torch.tensor(1.0)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(compiled(x.to("tpu"), s).cpu(), f(x, s_ref))
        assert s.device.type == "cpu" and s.item() == s_ref.item()


def test_cpu_input_runs_eagerly_with_warning():
    """A graph that returns a CPU tensor computed from a CPU input keeps its CPU inputs: it runs
    eagerly on them, saying why."""
    def f(x, s):
        return x * s, s * 2

    x, s = torch.randn(4), torch.tensor(3.0)
    with pytest.warns(UserWarning, match="input 1 is a cpu tensor"):
        out, doubled = torch.compile(f, backend="tpu")(x.to("tpu"), s)
    torch.testing.assert_close(out.cpu(), x * s)
    assert doubled.device.type == "cpu" and doubled.item() == 6.0


def test_random_numbers_advance_on_replay_and_follow_the_seed():
    def f(x):
        return torch.nn.functional.dropout(x, p=0.5, training=True) + torch.rand_like(x)

    compiled = torch.compile(f, backend="tpu")
    x = torch.ones(64, device="tpu")
    torch.manual_seed(7)
    first = [compiled(x).cpu() for _ in range(3)]
    torch.manual_seed(7)
    second = [compiled(x).cpu() for _ in range(3)]
    assert torchtpu._compile.stats()["compiled_replays"] >= 4
    for a, b in zip(first, second):
        torch.testing.assert_close(a, b)
    assert not torch.equal(first[0], first[1]) and not torch.equal(first[1], first[2])
    kept = (first[0] >= 1).float().mean().item()  # dropout kept about half (and scaled by 2)
    assert 0.2 < kept < 0.8


def test_input_mutation_and_aliased_outputs():
    def f(x, y):
        x.add_(1)
        return x.t(), y[1:], x * y

    compiled = torch.compile(f, backend="tpu")
    for _ in range(3):
        x, y = torch.randn(3, 3), torch.randn(3, 3)
        xt, yt = x.to("tpu"), y.to("tpu")
        a, b, c = compiled(xt, yt)
        ea, eb, ec = f(x, y)
        torch.testing.assert_close(xt.cpu(), x)  # mutated in place
        torch.testing.assert_close(a.cpu(), ea)
        torch.testing.assert_close(b.cpu(), eb)
        torch.testing.assert_close(c.cpu(), ec)
        yt.mul_(0)
        assert b.cpu().abs().sum().item() == 0  # b is still a view of y


def test_inference_with_no_grad_and_batch_norm_running_stats():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    tpu = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    tpu.load_state_dict(cpu.state_dict())
    tpu.to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(2, 3, 8, 8)
            torch.testing.assert_close(compiled(x.to("tpu")).cpu(), cpu(x), rtol=1e-4,
                                       atol=1e-5)
    torch.testing.assert_close(tpu[1].running_mean.cpu(), cpu[1].running_mean)
    torch.testing.assert_close(tpu[1].running_var.cpu(), cpu[1].running_var)


@pytest.mark.parametrize("mode", ["defer_and_fuse", "debug"])
def test_compiled_in_other_eager_modes(mode):
    def f(x):
        return (x.exp() - 1).sum()

    x = torch.randn(16)
    with torchtpu.eager_mode(mode):
        compiled = torch.compile(f, backend="tpu")
        pre = x.to("tpu") * 1  # pending under defer_and_fuse
        outs = [compiled(pre).item() for _ in range(3)]
    for out in outs:
        assert out == pytest.approx(f(x).item(), rel=1e-5)


def test_compile_debug_writes_fx_and_stablehlo(tmp_path):
    result = run_python("""
        import torch, torchtpu
        f = torch.compile(lambda x: (x * 2).relu().sum(), backend="tpu")
        print(f(torch.ones(4, device="tpu")).item())
    """, TORCHTPU_COMPILE_DEBUG="1", TORCHTPU_COMPILE_DEBUG_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("8.0")
    names = sorted(os.listdir(tmp_path))
    fx = [n for n in names if n.endswith(".fx.py")]
    hlo = [n for n in names if n.endswith(".stablehlo.mlir")]
    assert fx and hlo, names
    assert "torch.ops.aten" in (tmp_path / fx[0]).read_text()
    assert "func.func" in (tmp_path / hlo[0]).read_text()


def test_second_process_loads_compiled_programs_from_disk(tmp_path):
    code = """
        import torch, torchtpu
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()).to("tpu")
        f = torch.compile(m, backend="tpu")
        loss = f(torch.ones(2, 8, device="tpu")).sum()
        loss.backward()
        loss.item()
        m = torchtpu.metrics()
        print(m["executables_compiled"], m["executables_loaded_from_disk"])
    """
    env = {"TORCHTPU_CACHE_DIR": str(tmp_path)}
    first = run_python(code, **env)
    assert first.returncode == 0, first.stderr
    compiled, loaded = map(int, first.stdout.split()[-2:])
    assert compiled > 0 and loaded == 0
    second = run_python(code, **env)
    assert second.returncode == 0, second.stderr
    compiled, loaded = map(int, second.stdout.split()[-2:])
    assert compiled == 0 and loaded > 0


def test_replay_after_deferred_draws_keeps_the_random_stream():
    compiled = torch.compile(lambda x: x + torch.rand_like(x), backend="tpu")
    x = torch.zeros(8, device="tpu")
    compiled(x)  # captured

    def draws(mode):
        with torchtpu.eager_mode(mode):
            torch.manual_seed(3)
            a = torch.rand(8, device="tpu")  # pending under defer_and_fuse
            b = compiled(x)                  # a replay: must see the state after a's draw
            c = torch.rand(8, device="tpu")
            return [t.cpu() for t in (a, b, c)]

    strict, deferred = draws("strict"), draws("defer_and_fuse")
    for s, d in zip(strict, deferred):
        assert torch.equal(s, d)
    assert not torch.equal(strict[0], strict[1]) and not torch.equal(strict[1], strict[2])


def test_optimizer_with_step_counts_on_the_cpu_is_right():
    """Without capturable=True the step counts stay CPU scalars: they are program arguments, and
    the counts the graph writes are written back."""
    params = [torch.randn(5)]
    grad = torch.randn(5)
    ref = [params[0].clone().requires_grad_()]
    dev = [params[0].to("tpu").requires_grad_()]
    opt_ref, opt = torch.optim.Adam(ref, lr=0.1), torch.optim.Adam(dev, lr=0.1)

    @torch.compile(backend="tpu")
    def step():
        opt.step()

    def both_steps():
        ref[0].grad, dev[0].grad = grad.clone(), grad.to("tpu")
        opt_ref.step()
        step()

    for _ in range(3):
        both_steps()
    assert opt.state[dev[0]]["step"].device.type == "cpu"
    assert opt.state[dev[0]]["step"].item() == opt_ref.state[ref[0]]["step"].item() == 3
    # the graph computes the bias corrections as float32 tensors, eager Adam as Python floats
    torch.testing.assert_close(dev[0].detach().cpu(), ref[0].detach(), rtol=1e-4, atol=1e-5)


def test_learning_rate_schedule_through_a_tpu_tensor_replays():
    torch.manual_seed(0)
    p_ref = torch.randn(5, requires_grad=True)
    p = p_ref.detach().to("tpu").requires_grad_()
    grad = torch.randn(5)
    opt_ref = torch.optim.AdamW([p_ref], lr=0.1)
    lr = torch.tensor(0.1, device="tpu")
    opt = torch.optim.AdamW([p], lr=lr, capturable=True)
    step = torch.compile(lambda: opt.step(), backend="tpu")
    before = torchtpu._compile.stats()
    for i in range(5):
        p_ref.grad, p.grad = grad.clone(), grad.to("tpu")
        opt_ref.param_groups[0]["lr"] = 0.1 / (i + 1)
        lr.fill_(0.1 / (i + 1))  # the replayed program reads the tensor's current value
        opt_ref.step()
        step()
    d = stats_delta(before)
    assert d["compiled_captures"] == 1 and d["compiled_replays"] == 4
    torch.testing.assert_close(p.detach().cpu(), p_ref.detach(), rtol=1e-4, atol=1e-5)


def graph_with_a_collective():
    """x * y, then a functional collective (a wait_tensor, which needs no process group), then
    + 1, written into y; returns the sum, the collective's result and x as it is."""
    g = torch.fx.Graph()
    x, y = g.placeholder("x"), g.placeholder("y")
    prod = g.call_function(torch.ops.aten.mul.Tensor, (x, y))
    waited = g.call_function(torch.ops._c10d_functional.wait_tensor.default, (prod,))
    total = g.call_function(torch.ops.aten.add.Tensor, (waited, 1))
    g.call_function(torch.ops.aten.copy_.default, (y, total))
    g.output((total, waited, x))
    return torch.fx.GraphModule({}, g)


def test_partitions_are_the_runs_of_compute_and_of_collectives_in_order():
    gm = graph_with_a_collective()
    ids = torchtpu._compile._partitions(gm.graph)
    assert [(n.name, ids.get(n)) for n in gm.graph.nodes] == [
        ("x", None), ("y", None), ("mul_tensor", 0), ("wait_tensor_default", 1),
        ("add_tensor", 2), ("copy__default", 2), ("output", None)]


def test_graph_with_a_collective_is_split_into_replayed_device_programs():
    before = torchtpu._compile.stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = torchtpu._compile._compiler("inference", cached=True)(graph_with_a_collective(), [])
        x, y = torch.full((3,), 2.0, device="tpu"), torch.ones(3, device="tpu")
        expected = 1.0
        for _ in range(3):
            prod = 2 * expected
            expected = prod + 1
            total, waited, same_x = run([x, y])
            assert total.cpu().tolist() == [expected] * 3
            assert waited.cpu().tolist() == [prod] * 3
            assert y.cpu().tolist() == [expected] * 3  # written in place
            assert same_x is x
    said = [str(w.message) for w in caught]
    assert len(said) == 1 and "_c10d_functional::wait_tensor" in said[0], said
    assert "split into 2 device programs" in said[0], said
    assert run._boxed_call
    d = stats_delta(before)
    assert d == {"compiled_graphs": 1, "compiled_graphs_loaded": 0, "compiled_captures": 2,
                 "compiled_replays": 4,
                 "compiled_eager_runs": 0, "compiled_collective_runs": 3,
                 "compiled_bucketed_graphs": 0, "compiled_bucketed_calls": 0}, d


def test_a_replay_donates_the_buffers_it_rewrites():
    """An input the graph rewrites (an optimizer step's parameters and state) gives its old
    buffer to its new contents when nothing else holds it; a tensor sharing it keeps its value."""
    @torch.compile(backend="tpu")
    def step(p, g):
        p.sub_(g * 0.1)

    g = torch.randn(64)
    p = torch.randn(64)
    p_tpu, g_tpu = p.to("tpu"), g.to("tpu")
    step(p_tpu, g_tpu)
    step(p_tpu, g_tpu)  # captured, then replayed
    before = torchtpu.metrics()["donated_buffers"]
    step(p_tpu, g_tpu)
    assert torchtpu.metrics()["donated_buffers"] == before + 1
    shared = p_tpu.clone()  # the same (immutable) buffer as p_tpu's
    kept = shared.cpu()
    before = torchtpu.metrics()["donated_buffers"]
    step(p_tpu, g_tpu)
    assert torchtpu.metrics()["donated_buffers"] == before  # copied, not donated
    assert torch.equal(shared.cpu(), kept)
    torch.testing.assert_close(p_tpu.cpu(), p - 4 * (g * 0.1), rtol=1e-5, atol=1e-6)


def test_a_constant_the_graph_makes_and_rewrites_is_not_donated_away():
    """A tensor made inside the graph and written in place: every replay starts from its value."""
    @torch.compile(backend="tpu")
    def f(x):
        c = torch.tensor([1.0, 2.0, 3.0], device="tpu")
        c.mul_(2)
        return x + c

    x = torch.ones(3, device="tpu")
    for _ in range(4):
        assert f(x).cpu().tolist() == [3.0, 5.0, 7.0]
