"""Strict, Debug and DeferAndFuse: how they are chosen, when deferred work runs, and that all
three compute the same results."""

import copy

import pytest
import torch

import torchtpu
from conftest import run_python


def metrics():
    return torchtpu.metrics()


def program(x):
    y = x.t()[1:] * 2  # views and in-place through views, deferred like everything else
    y.add_(1)
    z = torch.cat([x, x * x]).softmax(0)
    w = z[:, :2].clone()
    w[0].mul_(-1)
    return (x.sum() + z.mean(), w)


def test_selection_api_and_context_manager():
    start = torchtpu.get_eager_mode()
    with torchtpu.eager_mode("strict"):
        assert torchtpu.get_eager_mode() == "strict"
        with torchtpu.eager_mode("defer_and_fuse"):
            assert torchtpu.get_eager_mode() == "defer_and_fuse"
            with torchtpu.eager_mode("debug"):
                assert torchtpu.get_eager_mode() == "debug"
            assert torchtpu.get_eager_mode() == "defer_and_fuse"
        assert torchtpu.get_eager_mode() == "strict"
    assert torchtpu.get_eager_mode() == start
    with pytest.raises(ValueError, match="eager mode must be one of strict, debug, "
                                         "defer_and_fuse, not 'lazy'"):
        torchtpu.set_eager_mode("lazy")


def test_environment_variable_sets_the_mode_at_start():
    code = "import torchtpu; print(torchtpu.get_eager_mode())"
    for mode in ["strict", "debug", "defer_and_fuse"]:
        r = run_python(code, TORCHTPU_EAGER_MODE=mode)
        assert r.stdout.strip() == mode, r.stderr
    r = run_python(code, TORCHTPU_EAGER_MODE=None)
    assert r.returncode == 0 and r.stdout.strip() == "defer_and_fuse", r.stderr
    r = run_python(code, TORCHTPU_EAGER_MODE="x")
    assert r.returncode == 0 and r.stdout.strip() == "defer_and_fuse"
    assert "TORCHTPU_EAGER_MODE" in r.stderr


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
def test_every_mode_matches_cpu(mode):
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    expected = program(x.clone())
    with torchtpu.eager_mode(mode):
        got = program(x.to("tpu"))
        for e, g in zip(expected, got):
            torch.testing.assert_close(g.cpu(), e)


def same_signature_other_layouts(device):
    """Ops repeated with one call signature over storages laid out differently (offsets, one
    storage shared, a storage with no contents yet, in place, another dtype's bits) and other
    scalar values: what Strict and Debug run again from each op's kept program."""
    g = torch.Generator().manual_seed(1)
    base = torch.randn(12, generator=g).to(device)
    x, y = torch.randn(4, generator=g).to(device), torch.randn(4, generator=g).to(device)
    out = []
    for alpha in (1, 2, -0.5):
        out.append(torch.add(x, y, alpha=alpha))
    out += [base[0:4] + base[4:8], base[1:5] + base[6:10], base[0:4] + y, x + x, x + y]
    for value in (3.0, -5.0):
        out.append(x * torch.tensor(value))  # a CPU 0-d tensor: a scalar operand
    target = torch.empty(4, device=device)
    torch.add(x, y, out=target)  # into a storage with no contents, then into one with
    out.append(target.clone())
    torch.add(y, y, out=target)
    out.append(target.clone())
    for fill in (None, 7.0):  # part of a storage: its other elements are zeros, then kept
        whole = (torch.empty(8, device=device) if fill is None
                 else torch.full((8,), fill, device=device))
        torch.add(x, y, out=whole[0:4])
        out.append(whole[0:4].clone() if fill is None else whole.clone())
    z = base.clone()
    z[4:8].add_(z[0:4])
    z[8:12].add_(z[0:4], alpha=3)
    z[0:4].mul_(2.0)
    z[0:4].mul_(-0.25)
    out.append(z)
    w = torch.randn(4, generator=g).to(device)
    bits = w.view(torch.int32)
    for _ in range(2):
        out.append(bits + 1)  # reads a float storage's bits, then an int storage's
        bits.add_(1)
        out.append(w * 2)
    return out


@pytest.mark.parametrize("mode", ["strict", "debug"])
def test_an_op_run_again_on_other_layouts_and_scalars_matches_cpu(mode):
    expected = same_signature_other_layouts("cpu")
    with torchtpu.eager_mode(mode):
        for run in range(2):
            before = metrics()
            got = same_signature_other_layouts("tpu")
            after = metrics()
            for e, t in zip(expected, got, strict=True):
                torch.testing.assert_close(t.cpu(), e, rtol=0, atol=0)
            if run == 1:  # every op kept: run again, none compiled or recorded
                assert after["executable_cache_misses"] == before["executable_cache_misses"]
                replays = after["kept_op_replays"] - before["kept_op_replays"]
                assert replays >= 20
                assert after["executable_cache_hits"] - before["executable_cache_hits"] >= replays


def same_ops_other_attributes(device):
    """Ops called again with other attribute arguments (dims, flags, dtypes, strings, absent
    optionals, static scalars, list lengths, output masks) and other scalar kinds: each call's
    attributes are its own, however many calls of the op came before."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 6, generator=g).to(device)
    y = torch.randn(4, 6, generator=g).abs().add(0.5).to(device)
    out = []
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            out.append(x.sum(dim, keepdim=keepdim))
            out.append(x.amax(dim, keepdim=keepdim))
    out += [x.sum(dtype=torch.float64), x.sum(), x.cumsum(0), x.cumsum(1, dtype=torch.float64)]
    out += [x.clamp(min=-0.5), x.clamp(max=0.5), x.clamp(-0.2, 0.3), x.clamp(min=None, max=0.1)]
    for mode in (None, "floor", "trunc"):
        out.append(torch.div(x, y, rounding_mode=mode))
    out += [x.pow(2), x.pow(2.5), x.pow(True), y.pow(3), x.add(y, alpha=2), x.add(y, alpha=0.5)]
    out += [x.norm(p=1), x.norm(p=2), x.norm(p=3.0), x.norm(p=float("inf"))]
    out += [torch.cat([x, y]), torch.cat([x, y, x]), torch.cat([x, y], dim=1)]
    out += [x.to(torch.float64), x.to(torch.int32), x.to(torch.bfloat16).float()]
    out += [x.transpose(0, 1).contiguous(), x.permute(1, 0).sum(0), x.flip(0), x.flip(1)]
    out += [torch.nn.functional.softmax(x, 0), torch.nn.functional.softmax(x, 1),
            torch.nn.functional.log_softmax(x, -1)]
    out += [x.topk(2, 1).values, x.topk(3, 0, largest=False).values]
    out.append(torch.nn.functional.interpolate(x[None, None], scale_factor=2.0, mode="nearest"))
    out.append(torch.nn.functional.interpolate(x[None, None], scale_factor=3.0, mode="nearest"))
    w = torch.randn(6, generator=g).to(device)
    for mask in ([True, False, True], [False, True, True], [True, True, False]):
        out += [t for t in torch.ops.aten.native_layer_norm_backward(
            x, x, [6], x.mean(1, keepdim=True), x.std(1, keepdim=True), w, w, mask) if t is not None]
    return out


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
def test_an_op_called_again_with_other_attributes_matches_cpu(mode):
    expected = same_ops_other_attributes("cpu")
    with torchtpu.eager_mode(mode):
        for _ in range(2):
            got = same_ops_other_attributes("tpu")
            for e, t in zip(expected, got, strict=True):
                torch.testing.assert_close(t.cpu(), e, rtol=1e-5, atol=1e-5, equal_nan=True)


SYNC_POINTS = {
    "item": lambda t: t.sum().item(),
    "cpu": lambda t: t.cpu(),
    "tolist": lambda t: t.tolist(),
    "numpy": lambda t: t.cpu().numpy(),
    "print": lambda t: str(t),
    "nonzero": lambda t: torch.nonzero(t > 0),
    "boolean_mask": lambda t: t[t > 0],
    "if": lambda t: bool(t.sum() > 0) or True,
    "synchronize": lambda t: torch.tpu.synchronize(),
    "mode_switch": lambda t: torchtpu.set_eager_mode("defer_and_fuse"),
}


@pytest.mark.parametrize("name", sorted(SYNC_POINTS))
def test_sync_points_run_the_pending_program(name):
    with torchtpu.eager_mode("defer_and_fuse"):
        x = torch.ones(5, device="tpu")
        y = x * 3 + 1
        before = metrics()["deferred_flushes"]
        SYNC_POINTS[name](y)
        assert metrics()["deferred_flushes"] >= before + 1
        assert y.cpu().tolist() == [4.0] * 5


def test_nothing_runs_until_a_sync_point():
    with torchtpu.eager_mode("defer_and_fuse"):
        before = metrics()
        x = torch.ones(8, device="tpu")
        for _ in range(10):
            x = x * 2 + 1
        assert metrics()["deferred_flushes"] == before["deferred_flushes"]
        assert metrics()["executable_cache_misses"] == before["executable_cache_misses"]
        assert x[0].item() == 2047.0


def test_errors_raise_at_the_call_site():
    with torchtpu.eager_mode("defer_and_fuse"):
        a = torch.ones(3, device="tpu")
        b = a * 2
        with pytest.raises(RuntimeError, match="must match the size of tensor b"):
            a + torch.ones(4, device="tpu")
        bools = torch.ones(2, dtype=torch.bool, device="tpu")
        with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
            bools - bools
        assert b.tolist() == [2.0, 2.0, 2.0]  # earlier work is unharmed


def test_a_repeated_step_hits_the_fused_program_cache():
    x = torch.randn(16, 16).to("tpu")
    with torchtpu.eager_mode("defer_and_fuse"):
        def step():
            return ((x @ x).relu() + 1).sum().item()
        step()
        compiled = metrics()["executable_cache_misses"]
        before = metrics()
        for _ in range(3):
            step()
        after = metrics()
        assert after["executable_cache_misses"] == compiled
        assert after["executable_cache_hits"] >= before["executable_cache_hits"] + 3
        # the fused programs' own counts, apart from the small programs .item() runs
        assert after["deferred_cache_hits"] == before["deferred_cache_hits"] + 3
        assert after["deferred_cache_misses"] == before["deferred_cache_misses"]


def test_a_repeated_op_sequence_is_a_sync_point():
    """A loop that reads a value only at its first step still runs one program per step: the ops
    recorded repeating the last program run is a sync point."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.2),
                                torch.nn.Linear(16, 1)).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(4, 8).to("tpu")
    with torchtpu.eager_mode("defer_and_fuse"):
        before = metrics()
        losses = []
        for step in range(5):
            loss = model(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
            if step == 0:
                losses[0].item()
        after = metrics()
    assert after["deferred_repeat_flushes"] - before["deferred_repeat_flushes"] == 4
    assert after["deferred_flushes"] - before["deferred_flushes"] == 5
    assert after["deferred_cache_hits"] - before["deferred_cache_hits"] == 4
    assert losses[-1].item() < losses[0].item()


def test_random_ops_are_deferred_with_the_rest():
    x = torch.ones(64, device="tpu")
    with torchtpu.eager_mode("defer_and_fuse"):
        before = metrics()["deferred_flushes"]
        y = torch.nn.functional.dropout(x * 2, 0.5) + torch.rand(64, device="tpu")
        z = torch.randn(64, device="tpu") * y
        assert metrics()["deferred_flushes"] == before  # nothing ran yet
        z.sum().item()
        assert metrics()["deferred_flushes"] == before + 1


def test_dead_intermediates_are_never_materialized():
    x = torch.ones(1024, device="tpu")  # 4 KiB
    with torchtpu.eager_mode("defer_and_fuse"):
        before = torch.tpu.memory_allocated()
        y = x
        for _ in range(20):
            y = y * 2 + 1  # 40 intermediates of 4 KiB each, all dead but the last
        torch.tpu.synchronize()
        assert torch.tpu.memory_allocated() == before + 4096
        del y


def test_node_bound_flushes_long_programs():
    r = run_python("""
        import torch, torchtpu
        torchtpu.set_eager_mode("defer_and_fuse")
        x = torch.zeros(4, device="tpu")
        for _ in range(100):
            x = x + 1
        print(torchtpu.metrics()["deferred_flushes"], x.tolist())
    """, TORCHTPU_DEFER_MAX_NODES="50")
    assert r.returncode == 0, r.stderr
    flushes, values = r.stdout.split(" ", 1)
    assert int(flushes) >= 4 and values.strip() == "[100.0, 100.0, 100.0, 100.0]"


def test_random_numbers_are_the_same_in_every_mode():
    draws = {}
    for mode in ["strict", "defer_and_fuse", "debug"]:
        with torchtpu.eager_mode(mode):
            torch.manual_seed(42)
            a = torch.rand(6, device="tpu") * 2
            b = torch.nn.functional.dropout(torch.ones(6, device="tpu"), 0.5)
            draws[mode] = (a.cpu(), b.cpu())
    for mode in ["defer_and_fuse", "debug"]:
        assert torch.equal(draws[mode][0], draws["strict"][0])
        assert torch.equal(draws[mode][1], draws["strict"][1])


def test_training_steps_match_strict():
    results = {}
    for mode in ["strict", "defer_and_fuse"]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(),
                                    torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        x, y = torch.randn(32, 8).to("tpu"), torch.randint(3, (32,)).to("tpu")
        losses = []
        with torchtpu.eager_mode(mode):
            for _ in range(5):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
                losses.append(loss.item())
        results[mode] = losses
    torch.testing.assert_close(results["defer_and_fuse"], results["strict"])


def test_debug_nans_names_the_first_op_that_makes_one():
    r = run_python("""
        import torch, torchtpu
        torchtpu.set_eager_mode("debug")
        x = torch.tensor([1.0, -1.0], device="tpu")
        y = x * 2
        try:
            z = torch.sqrt(y)  # the user's line
        except RuntimeError as e:
            import traceback
            print("raised:", e)
            print("line:", traceback.extract_tb(e.__traceback__)[-1].lineno)
    """, TORCHTPU_DEBUG_NANS="1")
    assert r.returncode == 0, r.stderr
    assert "raised: torchtpu debug: aten::sqrt produced a NaN or an infinity" in r.stdout
    assert "line: 7" in r.stdout  # the user's own line (line 7 of the script) raised


def test_a_training_loop_without_host_reads_compiles_a_handful_of_programs():
    """With no host read in the loop, DeferAndFuse finds the step's period itself: after a short
    warm-up each step runs as the same program, instead of long programs cut anywhere."""
    def train(mode):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                    torch.nn.Linear(64, 1)).to("tpu")
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        x, y = torch.randn(16, 32).to("tpu"), torch.randn(16, 1).to("tpu")
        with torchtpu.eager_mode(mode):
            before = metrics()
            for _ in range(30):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            torch.tpu.synchronize()
            after = metrics()
        counts = {k: after[k] - before[k] for k in ("executable_cache_misses",
                                                     "deferred_repeat_flushes",
                                                     "deferred_cache_misses")}
        return [p.detach().cpu() for p in model.parameters()], counts

    expected, _ = train("strict")
    params, counts = train("defer_and_fuse")
    for got, want in zip(params, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert counts["executable_cache_misses"] <= 10, counts
    assert counts["deferred_cache_misses"] <= 3, counts
    assert counts["deferred_repeat_flushes"] >= 25, counts


def test_a_loop_that_reads_a_value_every_step_is_cut_only_there():
    """A step made of two equal halves is not cut between them once reads mark the steps."""
    with torchtpu.eager_mode("defer_and_fuse"):
        x = torch.zeros(8, device="tpu")

        def step(x):
            for _ in range(2):  # two equal blocks of 40 ops
                for _ in range(20):
                    x = x * 0.5 + 1
            x.sum().item()
            return x

        x = step(step(x))
        before = metrics()
        for _ in range(4):
            x = step(x)
        after = metrics()
    assert after["deferred_flushes"] - before["deferred_flushes"] == 4
    assert after["deferred_cache_misses"] == before["deferred_cache_misses"]


def test_a_step_with_two_reads_close_together_is_not_cut_in_its_blocks():
    """A step that reads twice a few ops apart, then runs equal blocks (nn.TransformerEncoder
    with a padding mask: two reads of its lengths, then its layers) runs its blocks as one
    program: the few ops between the reads do not make the blocks look like the loop's step."""
    with torchtpu.eager_mode("defer_and_fuse"):
        x = torch.zeros(8, device="tpu")

        def step(x):
            for _ in range(2):  # two reads, a few ops apart
                (x + 1).sum().item()
            for _ in range(4):  # four equal blocks of 40 ops
                for _ in range(20):
                    x = x * 0.5 + 1
            return x

        for _ in range(3):
            x = step(x)
        before = metrics()
        for _ in range(4):
            x = step(x)
        after = metrics()
    assert after["deferred_flushes"] - before["deferred_flushes"] == 8  # at the reads only
    assert after["deferred_repeat_flushes"] == before["deferred_repeat_flushes"]


@pytest.mark.parametrize("convolutions", [1, 2])
def test_a_convolution_chains_backward_is_a_program_of_its_own(convolutions):
    """On the CPU plugin, DeferAndFuse cuts a program holding two convolutions or more where the
    autograd engine's thread starts recording the backward pass (one program of their forward
    and backward runs slower there); with one convolution the step stays one program. Either
    way the losses are Strict's."""
    layers = [torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU()]
    if convolutions == 2:
        layers += [torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.ReLU()]
    layers += [torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 3)]
    x, y = torch.randn(2, 3, 6, 6), torch.randint(3, (2,))
    results = {}
    for mode in ["strict", "defer_and_fuse"]:
        model = torch.nn.Sequential(*copy.deepcopy(layers)).to("tpu")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        with torchtpu.eager_mode(mode):
            for step in range(5):
                if step == 2:
                    before = metrics()["deferred_flushes"]
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x.to("tpu")), y.to("tpu"))
                loss.backward()
                opt.step()
                losses.append(loss.item())
            flushes = metrics()["deferred_flushes"] - before
        results[mode] = losses
    assert flushes == 3 * convolutions  # 3 steps, each one program or two
    torch.testing.assert_close(results["defer_and_fuse"], results["strict"])
