"""PyTorch's own parallelisms on "tpu" in real processes, one tpu device each (the CPU plugin):
DistributedDataParallel (gradient buckets, no_sync, unused parameters, buffers broadcast from rank
0) against a single-process run and against the same DDP on CPU tensors over gloo; a compiled DDP
step and a compiled FSDP2 model against the eager ones; compiled graphs holding functional
collectives, split at them (forward, backward, an input written in place); FSDP2 (bfloat16
parameters, float32 reductions, resharding after forward, forward prefetch) against a single-rank
FSDP2 run; a DCP checkpoint of FSDP2 model and optimizer written by 2 ranks and resumed by 1.
Process start-up dominates the time, so one group of 2 ranks runs every check (the single-rank runs
on a 1-rank subgroup of rank 0), and one test per check reads its outcome."""

import json
import os
import sys
import traceback

import pytest
import ranks
import torch
import torch.distributed as dist
import torch.nn.functional as F

STEPS = 10
SAVE_AT = 5  # the DCP checkpoint holds the state after this many FSDP2 steps


class Net(torch.nn.Module):
    """A small MLP with a buffer that differs per rank until DDP broadcasts it, and a layer that
    is used only when asked (an unused parameter for DDP). Defined here, not as an nn.Sequential:
    Dynamo compiles frames of user modules (it inlines torch.nn's own only when called from
    them)."""

    def __init__(self, rank=0):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 16)
        self.c = torch.nn.Linear(16, 4)
        self.unused = torch.nn.Linear(16, 4)
        self.register_buffer("shift", torch.full((16,), 0.1 * (rank + 1)))

    def forward(self, x, use_all=False):
        h = torch.relu(self.a(x)) + self.shift
        h = torch.relu(self.b(h))
        return self.c(h) + (self.unused(h) if use_all else 0)


def _data(world):
    g = torch.Generator().manual_seed(1)
    return torch.randn(STEPS, 4 * world, 8, generator=g), torch.randn(STEPS, 4 * world, 4,
                                                                       generator=g)


def _shard(t, rank, world):
    return t.chunk(world)[rank]


def _ddp_losses(device, group, rank, world, compiled=False):
    """10 DDP steps on `device` with `group`: tiny buckets (one per parameter), the third step
    accumulated over two micro-batches under no_sync, and find_unused_parameters. Returns the
    global mean loss per step, the final parameters, the buffer after DDP's broadcast, and DDP's
    logging data (its reducer's timings)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = Net(rank).to(device)
    ddp = DDP(net, process_group=group, find_unused_parameters=True,
              bucket_cap_mb=None if compiled else 0.0005)  # DDPOptimizer wants >= the first's
    fwd = torch.compile(ddp, backend="tpu") if compiled else ddp
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    X, Y = _data(world)
    losses = []
    for i in range(STEPS):
        x, y = _shard(X[i], rank, world).to(device), _shard(Y[i], rank, world).to(device)
        opt.zero_grad()
        if i == 2:  # gradient accumulation: the first half-batch reduces nothing
            with ddp.no_sync():
                F.mse_loss(fwd(x[:2]), y[:2]).mul(0.5).backward()
            own = net.a.weight.grad.detach().clone()
            both = own.clone()
            dist.all_reduce(both, group=group)
            assert not torch.allclose(both, 2 * own), "no_sync reduced the gradients"
            loss = F.mse_loss(fwd(x[2:]), y[2:]).mul(0.5)
            loss.backward()
            loss = loss * 2  # the other half's loss is not kept: report this half's, unscaled
        else:
            loss = F.mse_loss(fwd(x), y)
            loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, group=group)
        losses.append(total.item() / world)
    return (losses, [p.detach().cpu() for p in net.parameters()], net.shift.cpu(),
            ddp._get_ddp_logging_data())


def _reference_losses(world):
    """The same 10 steps in one process on the CPU, each step on the whole batch (the no_sync step
    as its two micro-batches: each rank's first quarter, then its second)."""
    net = Net(0)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    X, Y = _data(world)
    losses = []
    for i in range(STEPS):
        opt.zero_grad()
        if i == 2:
            parts = [(_shard(X[i], r, world), _shard(Y[i], r, world)) for r in range(world)]
            first = sum(F.mse_loss(net(x[:2]), y[:2]) for x, y in parts) / world
            second = sum(F.mse_loss(net(x[2:]), y[2:]) for x, y in parts) / world
            (0.5 * (first + second)).backward()
            loss = second
        else:
            loss = F.mse_loss(net(X[i]), Y[i])
            loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach() for p in net.parameters()]


def _close(a, b, rtol, atol=1e-6):
    assert len(a) == len(b), (a, b)
    for x, y in zip(a, b):
        x, y = torch.as_tensor(x), torch.as_tensor(y)
        assert torch.allclose(x, y, rtol=rtol, atol=atol), (x, y)


# ----------------------------------------------------------------------------------------------
# The checks, each run by both ranks

def _check_ddp(state, rank, world):
    losses, params, shift, logged = state["ddp"] = _ddp_losses("tpu", None, rank, world)
    ref_losses, ref_params = _reference_losses(world)
    _close(losses, ref_losses, rtol=1e-5)
    _close(params[:6], ref_params[:6], rtol=1e-4, atol=1e-5)  # `unused` never trains
    _close(params[6:], ref_params[6:], rtol=0, atol=0)
    assert torch.equal(shift, torch.full((16,), 0.1)), shift  # rank 0's buffer everywhere
    for key in ("avg_forward_compute_time", "avg_backward_compute_time", "avg_backward_comm_time"):
        assert logged.get(key, 0) > 0, (key, logged)  # the reducer timed with tpu events


def _check_ddp_vs_gloo(state, rank, world):
    gloo = dist.new_group(backend="gloo")
    losses, params, _, _ = _ddp_losses("cpu", gloo, rank, world)
    _close(state["ddp"][0], losses, rtol=1e-5)
    _close(state["ddp"][1], params, rtol=1e-4, atol=1e-5)


def _check_compiled_ddp(state, rank, world):
    import torchtpu
    before = torchtpu.metrics()
    losses, params, _, _ = _ddp_losses("tpu", None, rank, world, compiled=True)
    after = torchtpu.metrics()
    eager, eager_params, _, _ = _ddp_losses("tpu", None, rank, world, compiled=False)
    _close(losses, eager, rtol=1e-6)
    _close(params, eager_params, rtol=1e-5, atol=1e-6)
    assert after["compiled_replays"] > before["compiled_replays"], after
    assert after["compiled_eager_runs"] == before["compiled_eager_runs"], after
    assert after["cpu_fallback_calls"] == before["cpu_fallback_calls"], after["cpu_fallbacks"]


def _compiled_runs(fn, calls):
    """Runs every call of `fn`, returning its results, the warnings naming a functional
    collective, and torchtpu.metrics()'s compiled counters after the first call and after the
    last, as increments."""
    import warnings

    import torchtpu
    keys = ("compiled_captures", "compiled_replays", "compiled_eager_runs",
            "compiled_collective_runs")
    start, counts, results = torchtpu.metrics(), [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i, args in enumerate(calls):
            results.append(fn(*args))
            if i in (0, len(calls) - 1):
                counts.append({k: torchtpu.metrics()[k] - start[k] for k in keys})
    said = [str(w.message) for w in caught if "_c10d_functional::" in str(w.message)]
    return results, said, counts


def _check_compiled_functional_collective(state, rank, world):
    """A compiled graph holding a functional collective is split at it: the compute on each side
    is captured once and replayed as a device program, the collective runs eagerly between them
    on every call, and one warning, when the graph is compiled, names it."""
    import torch.distributed._functional_collectives as funcol

    @torch.compile(backend="tpu")
    def f(x):
        return funcol.all_reduce(x * 2, "sum", dist.group.WORLD) + 1

    calls = [(torch.full((4,), float(rank + i), device="tpu"),) for i in range(3)]
    outs, said, (first, last) = _compiled_runs(f, calls)
    for i, out in enumerate(outs):
        assert out.cpu().tolist() == [2.0 * (2 * i + 1) + 1] * 4, (i, out)
    assert len(said) == 1 and "_c10d_functional::all_reduce" in said[0], said
    assert "split into 2 device programs" in said[0], said
    assert first == {"compiled_captures": 2, "compiled_replays": 0, "compiled_eager_runs": 0,
                     "compiled_collective_runs": 1}, first
    assert last == {"compiled_captures": 2, "compiled_replays": 4, "compiled_eager_runs": 0,
                    "compiled_collective_runs": 3}, last


def _check_compiled_collective_input_mutation(state, rank, world):
    """A split graph that writes an input in place (kept in the graph) and returns a collective's
    result as it is: the writes accumulate over the calls, in the graph's order."""
    import torch.distributed._functional_collectives as funcol

    @torch.compile(backend="tpu")
    def f(x, total):
        reduced = funcol.all_reduce(x, "sum", dist.group.WORLD)
        total.add_(reduced)
        return reduced, total * 2

    total = torch.zeros(4, device="tpu")
    calls = [(torch.full((4,), float(rank + i), device="tpu"), total) for i in range(3)]
    outs, said, (first, last) = _compiled_runs(f, calls)
    running = 0.0
    for i, (reduced, doubled) in enumerate(outs):
        running += sum(r + i for r in range(world))
        assert reduced.cpu().tolist() == [sum(r + i for r in range(world))] * 4, (i, reduced)
        assert doubled.cpu().tolist() == [2 * running] * 4, (i, doubled)
    assert total.cpu().tolist() == [running] * 4, total
    assert len(said) == 1, said
    assert last["compiled_captures"] == first["compiled_captures"] > 0, (first, last)
    assert last["compiled_replays"] == 2 * first["compiled_captures"], (first, last)
    assert last["compiled_eager_runs"] == 0, last


def _check_compiled_collective_backward(state, rank, world):
    """Backward through a compiled all_reduce: the forward and the backward graph are each split
    at their all_reduce (one warning each), every piece replays, and the gradients are the eager
    run's."""
    import torch.distributed._functional_collectives as funcol

    def f(x, w):
        return funcol.all_reduce(x * w, "sum", dist.group.WORLD).sin()

    def grad(fn, x, w):
        w = w.detach().requires_grad_()
        fn(x, w).sum().backward()
        return w.grad.cpu()

    compiled = torch.compile(f, backend="tpu")
    w = torch.linspace(0.1, 0.4, 4, device="tpu") * (rank + 1)
    calls = [(compiled, torch.full((4,), 0.5 * (rank + i), device="tpu"), w) for i in range(3)]
    grads, said, (first, last) = _compiled_runs(grad, calls)
    for (_, x, w), g in zip(calls, grads):
        _close([g], [grad(f, x, w)], rtol=1e-6)
    assert len(said) == 2, said  # the forward graph and the backward graph
    assert last["compiled_captures"] == first["compiled_captures"] > 0, (first, last)
    assert last["compiled_replays"] == 2 * first["compiled_captures"], (first, last)
    assert last["compiled_eager_runs"] == 0, last
    assert last["compiled_collective_runs"] == 3 * first["compiled_collective_runs"] == 6, last


def _fsdp_model(mesh, bf16=True):
    """FSDP2 over `mesh`; bf16: MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    net = Net(0).to("tpu")
    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if bf16 else MixedPrecisionPolicy())
    for layer in (net.a, net.b, net.c):
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
    fully_shard(net, mesh=mesh, mp_policy=policy)
    net.a.set_modules_to_forward_prefetch([net.b])
    net.b.set_modules_to_forward_prefetch([net.c])
    return net, torch.optim.AdamW(net.parameters(), lr=0.01)


def _fsdp_steps(net, opt, group, rank, world, steps, on_step=None):
    X, Y = _data(2)  # the batches of the 2-rank run, whatever the world size
    losses = []
    for i in steps:
        x, y = _shard(X[i], rank, world).to("tpu"), _shard(Y[i], rank, world).to("tpu")
        loss = F.mse_loss(net(x, use_all=True).float(), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total, group=group)
        losses.append(total.item() / world)
        if on_step is not None:
            on_step(i)
    return losses


def _full_state(net, opt, group=None):
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict
    msd, osd = get_state_dict(net, opt, options=StateDictOptions(full_state_dict=True,
                                                                 cpu_offload=True))
    return {"model": msd, "optim": osd}


def _checkpointed_run(state, rank, world, key, bf16):
    """FSDP2 on every rank for STEPS steps, saved with DCP after SAVE_AT (state[key], its full
    state in state[key + "_saved"]); then rank 0 alone (a 1-rank subgroup) loads the checkpoint
    and runs the remaining steps (state[key + "_resumed"], its loaded state in
    state[key + "_loaded"]). Returns the 1-rank group's mesh on rank 0, else None."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    net, opt = _fsdp_model(init_device_mesh("tpu", (world,)), bf16)
    assert net.a.weight.device.type == "tpu" and net.a.weight.to_local().shape == (8, 8)
    folder = f"{state['checkpoint']}_{key}"

    def save(i):
        if i == SAVE_AT - 1:
            msd, osd = get_state_dict(net, opt)
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=folder)
            state[key + "_saved"] = _full_state(net, opt)
    state[key] = _fsdp_steps(net, opt, None, rank, world, range(STEPS), save)

    solo = dist.new_group([0])
    if rank != 0:
        return None
    mesh = DeviceMesh.from_group(solo, "tpu")
    net2, opt2 = _fsdp_model(mesh, bf16)
    msd, osd = get_state_dict(net2, opt2)
    loaded = {"model": msd, "optim": osd}
    dcp.load(loaded, checkpoint_id=folder, process_group=solo)
    set_state_dict(net2, opt2, model_state_dict=loaded["model"],
                   optim_state_dict=loaded["optim"])
    state[key + "_loaded"] = _full_state(net2, opt2)
    state[key + "_resumed"] = _fsdp_steps(net2, opt2, solo, 0, 1, range(SAVE_AT, STEPS))
    return mesh


def _check_fsdp2(state, rank, world):
    mesh = _checkpointed_run(state, rank, world, "fsdp2", bf16=True)
    if mesh is not None:  # the same run from the start on one rank
        net1, opt1 = _fsdp_model(mesh)
        state["fsdp2_single"] = _fsdp_steps(net1, opt1, mesh.get_group(), 0, 1, range(STEPS))


def _check_compiled_fsdp2(state, rank, world):
    """The FSDP2 model compiled (its hooks run between the graphs) gives the eager run's first
    losses, every graph replayed on the device."""
    from torch.distributed.device_mesh import init_device_mesh

    import torchtpu
    net, opt = _fsdp_model(init_device_mesh("tpu", (world,)))
    net.compile(backend="tpu")
    before = torchtpu.metrics()
    losses = _fsdp_steps(net, opt, None, rank, world, range(4))
    after = torchtpu.metrics()
    _close(losses, state["fsdp2"][:4], rtol=1e-6)
    assert after["compiled_replays"] > before["compiled_replays"], after
    assert after["compiled_eager_runs"] == before["compiled_eager_runs"], after


def _check_fsdp2_vs_single(state, rank, world):
    if rank == 0:  # bfloat16 parameters: the two runs round their matmuls differently
        _close(state["fsdp2"], state["fsdp2_single"], rtol=2e-2)


def _flat_state(tree, prefix=""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _flat_state(v, f"{prefix}/{k}")
    elif isinstance(tree, (list, tuple)):
        for i, v in enumerate(tree):
            yield from _flat_state(v, f"{prefix}/{i}")
    else:
        yield prefix, tree


def _same_state(saved, loaded):
    saved, loaded = dict(_flat_state(saved)), dict(_flat_state(loaded))
    assert saved.keys() == loaded.keys(), (saved.keys(), loaded.keys())
    assert any("exp_avg" in k for k in saved), saved.keys()
    for k, v in saved.items():  # the state 1 rank resumes from is the 2 ranks' state, bitwise
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, loaded[k].to(v.device)), k
        else:
            assert v == loaded[k], k


def _check_dcp_resume(state, rank, world):
    if rank != 0:
        return
    _same_state(state["fsdp2_saved"], state["fsdp2_loaded"])
    # bfloat16 parameters: one rank rounds its matmuls over the whole batch differently
    _close(state["fsdp2_resumed"], state["fsdp2"][SAVE_AT:], rtol=2e-2)


def _check_dcp_resume_float32(state, rank, world):
    """Without mixed precision the resumed 1-rank run continues the 2-rank run's losses to
    float32 rounding (the gradient is the mean over the same batch, summed in another order)."""
    _checkpointed_run(state, rank, world, "fsdp2_f32", bf16=False)
    if rank == 0:
        _same_state(state["fsdp2_f32_saved"], state["fsdp2_f32_loaded"])
        _close(state["fsdp2_f32_resumed"], state["fsdp2_f32"][SAVE_AT:], rtol=1e-5)


CHECKS = {"ddp": _check_ddp, "ddp_vs_gloo": _check_ddp_vs_gloo,
          "compiled_ddp": _check_compiled_ddp,
          "compiled_functional_collective": _check_compiled_functional_collective,
          "compiled_collective_input_mutation": _check_compiled_collective_input_mutation,
          "compiled_collective_backward": _check_compiled_collective_backward,
          "fsdp2": _check_fsdp2, "compiled_fsdp2": _check_compiled_fsdp2,
          "fsdp2_vs_single": _check_fsdp2_vs_single, "dcp_resume": _check_dcp_resume,
          "dcp_resume_float32": _check_dcp_resume_float32}


# ----------------------------------------------------------------------------------------------
# The group of ranks


def _worker(rank, world, port, out_dir):
    import torchtpu
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torchtpu._C._set_cpu_fallback_policy("error")  # torchtpu loaded with this module's torch
    results = {}
    try:
        dist.init_process_group("tpu", rank=rank, world_size=world)
        state = {"checkpoint": os.path.join(out_dir, "checkpoint")}
        for name, check in CHECKS.items():
            try:
                check(state, rank, world)
                results[name] = None
            except Exception:  # noqa: BLE001  (reported by the test of this check)
                results[name] = traceback.format_exc()
            dist.barrier()
    except Exception:  # noqa: BLE001
        results["job"] = traceback.format_exc()
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(results, f)
    if dist.is_initialized():
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out_dir = str(tmp_path_factory.mktemp("parallel"))
    return ranks.finished(*ranks.launch(_worker, 2, out_dir, out_dir, timeout=300))


@pytest.mark.parametrize("check", list(CHECKS))
def test_two_ranks(two_ranks, check):
    ranks.assert_passed(two_ranks, check)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
