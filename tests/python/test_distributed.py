"""The c10d backend "tpu" in real processes, one tpu device each (the CPU plugin): every collective
and dtype against gloo on CPU tensors with the same inputs, bitwise; a short 4-rank run; ranks that
die, hang or disagree on shapes. Process start-up dominates the time, so each group of ranks is
started once (a module fixture) and runs all its checks; one test per check reads its outcome."""

import datetime
import json
import os
import sys
import time
import traceback

import pytest
import ranks
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from conftest import sample
from torch.distributed import ReduceOp

import torchtpu

R = ReduceOp
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INTS = [torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool]
DTYPES = FLOATS + INTS  # what torch and gloo share


def _inputs(shape, dtype, rank, k=0):
    return sample(shape, dtype, seed=100 * rank + k)


# ----------------------------------------------------------------------------------------------
# Checks against gloo: fn(device, group, rank, world) -> tensors, run on "tpu" with the tpu group
# and on "cpu" with a gloo group; the results must be equal, bitwise.

SAME = {}


def same(name):
    def register(fn):
        SAME[name] = fn
        return fn
    return register


def _ops_for(dtype):
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    return ops + [R.BAND, R.BOR, R.BXOR] if not dtype.is_floating_point else ops


for _dt in DTYPES:
    for _op in _ops_for(_dt):
        def _all_reduce(dev, group, rank, world, dt=_dt, op=_op):
            x = _inputs((3, 5), dt, rank).to(dev)
            dist.all_reduce(x, op=op, group=group)
            return [x]
        same(f"all_reduce-{str(_op).split('.')[-1]}-{_dt}")(_all_reduce)

    def _broadcast(dev, group, rank, world, dt=_dt):
        x = _inputs((4, 3), dt, rank).to(dev)
        dist.broadcast(x, src=1, group=group)
        return [x]
    same(f"broadcast-{_dt}")(_broadcast)

    def _all_gather_into_tensor(dev, group, rank, world, dt=_dt):
        out = torch.zeros(world * 6, dtype=dt, device=dev)
        dist.all_gather_into_tensor(out, _inputs((6,), dt, rank).to(dev), group=group)
        return [out]
    same(f"all_gather_into_tensor-{_dt}")(_all_gather_into_tensor)

    def _reduce_scatter_tensor(dev, group, rank, world, dt=_dt):
        out = torch.zeros(2, 3, dtype=dt, device=dev)
        op = R.SUM if dt != torch.bool else R.MAX
        dist.reduce_scatter_tensor(out, _inputs((2 * world, 3), dt, rank).to(dev), op=op,
                                   group=group)
        return [out]
    same(f"reduce_scatter_tensor-{_dt}")(_reduce_scatter_tensor)

    def _all_to_all_single(dev, group, rank, world, dt=_dt):
        # uneven: rank r sends r + 1 + j rows to rank j
        send = [rank + 1 + j for j in range(world)]
        recv = [j + 1 + rank for j in range(world)]
        out = torch.zeros(sum(recv), 2, dtype=dt, device=dev)
        dist.all_to_all_single(out, _inputs((sum(send), 2), dt, rank).to(dev), recv, send,
                               group=group)
        return [out]
    same(f"all_to_all_single-{_dt}")(_all_to_all_single)


@same("reduce")
def _reduce(dev, group, rank, world):
    x = _inputs((7,), torch.float32, rank).to(dev)
    y = _inputs((7,), torch.int64, rank).to(dev)
    dist.reduce(x, dst=0, group=group)
    dist.reduce(y, dst=1, op=R.MAX, group=group)
    return [x if rank == 0 else x * 0, y if rank == 1 else y * 0]  # only the root's is defined


@same("equal_counts_of_other_shapes")
def _equal_counts_of_other_shapes(dev, group, rank, world):
    # gloo and NCCL send element counts, not shapes: ranks may reduce a (2, 3) with a (3, 2)
    shape = (2, 3) if rank % 2 == 0 else (3, 2)
    x = _inputs(shape, torch.float32, rank).to(dev)
    y = _inputs(shape, torch.int64, rank, 1).to(dev)
    dist.all_reduce(x, group=group)
    dist.broadcast(y, 0, group=group)
    return [x, y]


@same("all_gather")
def _all_gather(dev, group, rank, world):
    outs = [torch.zeros(2, 3, device=dev) for _ in range(world)]
    dist.all_gather(outs, _inputs((2, 3), torch.float32, rank).to(dev), group=group)
    return outs


@same("all_gather_coalesced")
def _all_gather_coalesced(dev, group, rank, world):
    ins = [_inputs((3,), torch.float32, rank), _inputs((2, 2), torch.float32, rank, 1)]
    outs = [[torch.zeros_like(t, device=dev) for t in ins] for _ in range(world)]
    dist.all_gather_coalesced(outs, [t.to(dev) for t in ins], group=group)
    return [t for ts in outs for t in ts]


@same("reduce_scatter")
def _reduce_scatter(dev, group, rank, world):
    out = torch.zeros(4, device=dev)
    ins = [_inputs((4,), torch.float32, rank, j).to(dev) for j in range(world)]
    dist.reduce_scatter(out, ins, group=group)
    return [out]


@same("all_to_all")
def _all_to_all(dev, group, rank, world):
    ins = [_inputs((3,), torch.int32, rank, j).to(dev) for j in range(world)]  # gloo: even
    outs = [torch.zeros(3, dtype=torch.int32, device=dev) for _ in range(world)]
    dist.all_to_all(outs, ins, group=group)
    return outs


@same("scatter_gather")
def _scatter_gather(dev, group, rank, world):
    out = torch.zeros(3, device=dev)
    ins = [_inputs((3,), torch.float32, 9, j).to(dev) for j in range(world)] if rank == 0 else None
    dist.scatter(out, ins, src=0, group=group)
    gathered = [torch.zeros(3, device=dev) for _ in range(world)] if rank == 1 else None
    dist.gather(out * (rank + 1), gathered, dst=1, group=group)
    return [out] + (gathered or [])


@same("send_recv")
def _send_recv(dev, group, rank, world):
    x = _inputs((5,), torch.float32, rank).to(dev)
    y = torch.zeros(5, device=dev)
    peer = 1 - rank
    if rank == 0:
        dist.send(x, peer, group=group)
        dist.recv(y, peer, group=group)
    else:
        dist.recv(y, peer, group=group)
        dist.send(x, peer, group=group)
    a, b = torch.zeros(2, 2, device=dev), torch.zeros(2, 2, device=dev)
    works = [dist.isend(x[:4].reshape(2, 2).contiguous(), peer, group=group),
             dist.irecv(a, peer, group=group)]
    for w in works:
        w.wait()
    ops = [dist.P2POp(dist.isend, x[1:5].reshape(2, 2).contiguous(), peer, group),
           dist.P2POp(dist.irecv, b, peer, group)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    return [y, a, b]


@same("all_reduce-AVG-PREMUL_SUM")
def _avg(dev, group, rank, world):
    f = _inputs((6,), torch.float32, rank).to(dev)
    i = _inputs((6,), torch.int64, rank).to(dev)
    p = _inputs((6,), torch.float32, rank, 1).to(dev)
    if dev == "cpu":  # gloo has neither: its SUM, then what NCCL does
        dist.all_reduce(f, group=group)
        f /= world
        dist.all_reduce(i, group=group)
        i = torch.div(i, world, rounding_mode="trunc")
        p *= 0.25
        dist.all_reduce(p, group=group)
    else:
        dist.all_reduce(f, op=R.AVG, group=group)
        dist.all_reduce(i, op=R.AVG, group=group)
        dist.all_reduce(p, op=dist._make_nccl_premul_sum(0.25), group=group)
    return [f, i, p]


@same("coalescing_manager")
def _coalescing(dev, group, rank, world):
    xs = [_inputs((3,), torch.float32, rank, k).to(dev) for k in range(3)]
    with dist._coalescing_manager(group=group, async_ops=True) as cm:
        for x in xs:
            dist.all_reduce(x, group=group)
    cm.wait()
    ins = [_inputs((4,), torch.bfloat16, rank, k).to(dev) for k in range(2)]
    gathered = [torch.zeros(4 * world, dtype=torch.bfloat16, device=dev) for _ in ins]
    with dist._coalescing_manager(group=group):
        for o, i in zip(gathered, ins):
            dist.all_gather_into_tensor(o, i, group=group)
    scattered = [torch.zeros(2, device=dev) for _ in range(2)]
    with dist._coalescing_manager(group=group, async_ops=True) as cm:
        for k, o in enumerate(scattered):
            dist.reduce_scatter_tensor(o, _inputs((2 * world,), torch.float32, rank, k).to(dev),
                                       group=group)
    cm.wait()
    return xs + gathered + scattered


@same("functional")
def _functional(dev, group, rank, world):
    x = _inputs((4,), torch.float32, rank).to(dev)
    out = [funcol.all_reduce(x, "sum", group),
           funcol.all_gather_tensor(x, 0, group),
           funcol.reduce_scatter_tensor(x, "sum", 0, group),
           funcol.all_to_all_single(x.repeat(world), [4] * world, [4] * world, group),
           funcol.broadcast(x, 1, group),
           *funcol.all_reduce_coalesced([x, x * 2], "max", group),
           *funcol.all_gather_into_tensor_coalesced([x, x[:2]], group),
           *funcol.reduce_scatter_tensor_coalesced([x, x * 3], "sum", [0, 0], group)]
    name = group.group_name
    y = torch.ops._c10d_functional.all_reduce(x, "sum", name)
    y = torch.ops._c10d_functional.wait_tensor(y)
    return [t.wait() if hasattr(t, "wait") else t for t in out] + [y]


@same("channels_last")
def _channels_last(dev, group, rank, world):
    # A channels_last tensor's dim 0 is outermost in memory too: each rank's part of a
    # reduce_scatter is a dim-0 slice of the reduced input, in the input's layout.
    def cl(k):
        return _inputs((2 * world, 3, 2, 2), torch.float32, rank, k).to(dev).to(
            memory_format=torch.channels_last)
    x, y = cl(0), cl(1)
    out = [funcol.reduce_scatter_tensor(x, "sum", 0, group),
           *funcol.reduce_scatter_tensor_coalesced([x, y * 3], "sum", [0, 0], group),
           funcol.all_reduce(y, "sum", group)]
    single = torch.zeros(2, 3, 2, 2, device=dev).to(memory_format=torch.channels_last)
    dist.reduce_scatter_tensor(single, x, group=group)
    flat = torch.zeros(2, 3, 2, 2, device=dev)
    dist.reduce_scatter_tensor(flat, x, group=group)
    parts = [torch.zeros(2, 3, 2, 2, device=dev).to(memory_format=torch.channels_last)
             for _ in range(2)]
    with dist._coalescing_manager(group=group, async_ops=True) as cm:
        for o, i in zip(parts, (x, y)):
            dist.reduce_scatter_tensor(o, i, group=group)
    cm.wait()
    return [t.wait() if hasattr(t, "wait") else t for t in out] + [single, flat] + parts


@same("object_collectives")
def _objects(dev, group, rank, world):
    objs = [{"rank": rank, "v": [rank] * 3}, f"r{rank}"]
    dist.broadcast_object_list(objs, src=1, group=group)
    gathered = [None] * world
    dist.all_gather_object(gathered, ("x", rank), group=group)
    assert objs == [{"rank": 1, "v": [1, 1, 1]}, "r1"], objs
    assert gathered == [("x", r) for r in range(world)], gathered
    return [torch.tensor(len(objs))]


# ----------------------------------------------------------------------------------------------
# Checks of the tpu group's own behaviour: fn(group, rank, world), raising when it is wrong.

OWN = {}


def own(fn):
    OWN[fn.__name__.lstrip("_")] = fn
    return fn


@own
def _async_op_returns_while_gloo_runs(group, rank, world):
    x = torch.arange(1 << 16, dtype=torch.float32, device="tpu") + rank
    dist.barrier(group=group)
    if rank == 1:
        time.sleep(1.0)  # rank 0's all_reduce cannot finish before this
    t0 = time.perf_counter()
    work = dist.all_reduce(x, async_op=True, group=group)
    issued = time.perf_counter() - t0
    fut = work.get_future()
    in_flight = not work.is_completed()
    work.wait()
    if rank == 0:  # the ranks agree on it in the group's launcher, not in this call
        assert issued < 0.5, issued
        assert in_flight
    assert work.is_completed() and work.is_success()
    (value,) = fut.wait()
    expected = torch.arange(1 << 16, dtype=torch.float32) * 2 + 1
    assert torch.equal(x.cpu(), expected) and torch.equal(value.cpu(), expected)


@own
def _async_collective_then_send_the_peer_needs_first(group, rank, world):
    # Rank 1 reaches the all_reduce only after rank 0's send: rank 0's all_reduce must not
    # wait for rank 1 at the call (a blocking agreement would deadlock here until the timeout).
    g = dist.new_group(backend="tpu", timeout=datetime.timedelta(seconds=30))
    x = torch.full((3,), float(rank + 1), device="tpu")
    msg = torch.arange(4.0, device="tpu") if rank == 0 else torch.zeros(4, device="tpu")
    if rank == 0:
        work = dist.all_reduce(x, async_op=True, group=g)
        dist.send(msg, 1, group=g)
        work.wait()
    else:
        dist.recv(msg, 0, group=g)
        dist.all_reduce(x, group=g)
    assert x.cpu().tolist() == [3.0] * 3 and msg.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


@own
def _two_groups_in_different_orders(group, rank, world):
    # Async collectives on two groups, issued in opposite orders by the two ranks (as 2-D
    # parallelism may): each group keeps its own order, so neither waits for the other.
    g = dist.new_group(backend="tpu", timeout=datetime.timedelta(seconds=30))
    a = torch.full((2,), float(rank + 1), device="tpu")
    b = torch.full((3,), float(10 * (rank + 1)), device="tpu")
    issue = [(a, group), (b, g)] if rank == 0 else [(b, g), (a, group)]
    works = [dist.all_reduce(t, async_op=True, group=grp) for t, grp in issue]
    for w in works:
        w.wait()
    assert a.cpu().tolist() == [3.0] * 2 and b.cpu().tolist() == [30.0] * 3


@own
def _cpu_and_tpu_tensors_keep_their_order(group, rank, world):
    # Same sizes and dtypes, so were gloo to see them in different orders on the two ranks, it
    # would add a tpu tensor to a CPU one and the values would show it. Rank 0 issues the CPU one
    # late: a CPU call overtaking the queued tpu one would run first on rank 1 only.
    values = [[], []]
    for k in range(3):
        t = torch.full((4,), float(rank + 1 + k), device="tpu")
        c = torch.full((4,), float(100 * (rank + 1 + k)))
        works = [dist.all_reduce(t, async_op=True, group=group)]
        if rank == 0:
            time.sleep(0.2)
        works.append(dist.all_reduce(c, async_op=True, group=group))
        for w in works:
            w.wait()
        values[0].append(t.cpu().tolist())
        values[1].append(c.tolist())
    assert values[0] == [[3.0 + 2 * k] * 4 for k in range(3)], values
    assert values[1] == [[300.0 + 200 * k] * 4 for k in range(3)], values


@own
def _names_and_defaults(group, rank, world):
    assert dist.get_backend(group) == "tpu"
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu"
    assert group.rank() == rank and group.size() == world
    assert torch._utils._get_available_device_type() == "tpu"


@own
def _non_contiguous_input_is_refused(group, rank, world):
    x = torch.zeros(4, 4, device="tpu").t()
    with pytest.raises(ValueError, match="contiguous"):
        dist.all_reduce(x, group=group)


@own
def _device_mesh(group, rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("tpu", (world,))
    x = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(x, group=mesh.get_group())
    assert x.cpu().tolist() == [sum(range(world))] * 2


@own
def _backend_strings(group, rank, world):
    for spec in ("tpu:tpu,cpu:gloo", "cpu:gloo,tpu:tpu"):
        g = dist.new_group(backend=spec)
        assert type(g).__name__ == "ProcessGroupTPU", type(g)
        x, c = torch.ones(2, device="tpu"), torch.ones(2)
        dist.all_reduce(x, group=g)
        dist.all_reduce(c, group=g)
        assert x.cpu().tolist() == c.tolist() == [2.0, 2.0]


# Failures, run last (the last one ends rank 1).

FAILURES = {}
CHECKS = torchtpu._config.flag("TORCHTPU_DIST_CHECKS", True)
NEED_CHECKS = {"mismatched_counts_raise_on_every_rank", "mismatch_fails_an_async_work"}


def failure(fn):
    FAILURES[fn.__name__.lstrip("_")] = fn
    return fn


def _mismatch(kind):
    return rf"torchtpu: collective #\d+ of this group: the ranks called different {kind}"


@failure
def _mismatched_counts_raise_on_every_rank(group, rank, world):
    # On by default (TORCHTPU_DIST_CHECKS=0 turns it off): without it gloo aborts the rank that
    # receives more elements than it expects.
    with pytest.raises(RuntimeError, match=r"different tensors .*rank 0: all_reduce SUM of "
                       r"\[\['float32', 4\]\]; rank 1: all_reduce SUM of \[\['float32', 5\]"):
        dist.all_reduce(torch.ones(4 + rank, device="tpu"), group=group)
    with pytest.raises(RuntimeError, match=_mismatch("collectives, or on different tensors")):
        dist.all_gather_into_tensor(torch.zeros(world * (2 + rank), device="tpu"),
                                    torch.ones(2 + rank, device="tpu"), group=group)
    with pytest.raises(RuntimeError, match=_mismatch("collectives, or on different tensors")):
        dist.broadcast(torch.ones(3, 1 + rank, device="tpu"), 0, group=group)
    with pytest.raises(RuntimeError, match="different collectives"):
        if rank == 0:
            dist.all_reduce(torch.ones(3, device="tpu"), group=group)
        else:
            dist.broadcast(torch.ones(3, device="tpu"), 0, group=group)
    sends, recvs = ([1, 2], [1, 2]) if rank == 0 else ([1, 1], [2, 1])
    with pytest.raises(RuntimeError, match="rank 1 sends 1 elements to rank 0, which "
                                           "expects 2"):
        dist.all_to_all_single(torch.zeros(sum(recvs), device="tpu"),
                               torch.ones(sum(sends), device="tpu"), recvs, sends,
                               group=group)
    many = [torch.ones(1, device="tpu") for _ in range(80)]  # a signature past 1 KiB: a digest
    dist.all_reduce_coalesced(many, group=group)
    assert many[0].cpu().item() == many[-1].cpu().item() == 2.0
    with pytest.raises(RuntimeError, match=r"different tensors .*rank 0: all_reduce_coalesced SUM "
                                           r"of crc \d+; rank 1: all_reduce_coalesced SUM of crc"):
        dist.all_reduce_coalesced(many[1:] + [torch.ones(1 + rank, device="tpu")], group=group)
    x = torch.ones(3, device="tpu")
    dist.all_reduce(x, group=group)  # the group still works
    assert x.cpu().tolist() == [2.0] * 3


@failure
def _mismatch_fails_an_async_work(group, rank, world):
    x = torch.ones(2 + rank, device="tpu")
    work = dist.all_reduce(x, async_op=True, group=group)
    future = work.get_future()
    with pytest.raises(RuntimeError, match=_mismatch("collectives, or on different tensors")):
        work.wait()
    assert work.is_completed() and not work.is_success()
    assert "different tensors" in str(work.exception())
    with pytest.raises(RuntimeError, match="different tensors"):
        future.wait()
    assert x.cpu().tolist() == [1.0] * (2 + rank)  # untouched
    dist.all_reduce(x[:2], group=group)
    assert x.cpu().tolist()[:2] == [2.0] * 2


@failure
def _silent_rank_fails_the_others_at_the_timeout(group, rank, world):
    g = dist.new_group(backend="tpu", timeout=datetime.timedelta(seconds=2))
    if rank == 0:
        t0 = time.monotonic()
        with pytest.raises(dist.DistBackendError, match=r"all_reduce \(collective #1 of this "
                           r"group\) failed on rank 0 of 2: no rank on this host has exited"):
            dist.all_reduce(torch.ones(2, device="tpu"), group=g)
        assert time.monotonic() - t0 < 20
    dist.barrier(group=group)


@failure
def _killed_rank_fails_the_others(group, rank, world):
    g = dist.new_group(backend="tpu", timeout=datetime.timedelta(seconds=120))
    dist.barrier(group=g)
    if rank == 1:
        _RESULTS["killed_rank_fails_the_others"] = None
        _save()
        os._exit(3)
    t0 = time.monotonic()
    with pytest.raises(dist.DistBackendError, match=r"all_reduce \(collective #2 of this group\) "
                       r"failed on rank 0 of 2: rank 1 has exited"):
        dist.all_reduce(torch.ones(1 << 16, device="tpu"), group=g)
    assert time.monotonic() - t0 < 60


# ----------------------------------------------------------------------------------------------
# The processes


def _compare(got, expected):
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        g = g.cpu()
        assert g.dtype == e.dtype and g.shape == e.shape, (i, g, e)
        assert torch.equal(g, e), f"result {i}: tpu {g} != gloo {e}"


_RESULTS: dict = {}  # in a worker: check name -> None, or the traceback of its failure
_OUT: list = []  # in a worker: the file its results go to


def _save():
    with open(_OUT[0], "w") as f:
        json.dump(_RESULTS, f)


def _record(name, fn, *args):
    try:
        fn(*args)
        _RESULTS[name] = None
    except Exception:  # noqa: BLE001  (reported by the test of this check)
        _RESULTS[name] = traceback.format_exc()


def _run_checks(rank, world, same, own, failures=()):
    tpu_group = dist.distributed_c10d._get_default_group()
    gloo_group = dist.new_group(backend="gloo")
    for name in same:
        fn = SAME[name]
        _record(name, lambda fn=fn: _compare(fn("tpu", tpu_group, rank, world),
                                             fn("cpu", gloo_group, rank, world)))
    for name in own:
        _record(name, OWN[name], tpu_group, rank, world)
    for name in failures:
        _record(name, FAILURES[name], tpu_group, rank, world)


def _worker(rank, world, port, job, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    _OUT.append(os.path.join(out_dir, f"{rank}.json"))
    try:
        JOBS[job](rank, world)
    except Exception:  # noqa: BLE001
        _RESULTS["job"] = traceback.format_exc()
    _save()
    if dist.is_initialized():
        dist.destroy_process_group()


def _job_two(rank, world):
    dist.init_process_group("tpu", rank=rank, world_size=world)
    _run_checks(rank, world, SAME, OWN, [f for f in FAILURES if CHECKS or f not in NEED_CHECKS])


FOUR_SAME = ["all_reduce-SUM-torch.float32", "all_reduce-PRODUCT-torch.bfloat16",
             "broadcast-torch.int64", "all_gather_into_tensor-torch.float16",
             "reduce_scatter_tensor-torch.float32", "all_to_all_single-torch.int32",
             "coalescing_manager", "functional"]


def _mesh_2x2(group, rank, world):
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("tpu", (2, 2), mesh_dim_names=("dp", "tp"))
    x = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(x, group=mesh.get_group("tp"))  # ranks {0, 1} and {2, 3}
    assert x.cpu().tolist() == [1.0 + 4 * (rank // 2)] * 2, x
    y = torch.full((2,), float(rank), device="tpu")
    dist.all_reduce(y, group=mesh.get_group("dp"))  # ranks {0, 2} and {1, 3}
    assert y.cpu().tolist() == [2.0 + 2 * (rank % 2)] * 2, y


def _job_four(rank, world):
    dist.init_process_group()  # no backend: the one of the accelerator, "tpu"
    _record("default_backend_is_tpu", lambda: _check_equal(
        type(dist.distributed_c10d._get_default_group()).__name__, "ProcessGroupTPU"))
    _record("mesh_2x2", _mesh_2x2, None, rank, world)
    _run_checks(rank, world, FOUR_SAME, [])


def _check_equal(got, expected):
    assert got == expected, (got, expected)


JOBS = {"two": _job_two, "four": _job_four}


def _ranks(job, world, tmp_path_factory, exit_codes):
    out_dir = str(tmp_path_factory.mktemp(job))
    results, codes = ranks.launch(_worker, world, out_dir, job, out_dir)
    assert codes == exit_codes, f"exit codes {codes}"
    return ranks.finished(results, codes)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return _ranks("two", 2, tmp_path_factory, [0, 3])  # rank 1 ends itself in the last check


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory):
    return _ranks("four", 4, tmp_path_factory, [0, 0, 0, 0])


@pytest.mark.parametrize("check", list(SAME) + list(OWN) + list(FAILURES))
def test_two_ranks(two_ranks, check):
    if check in NEED_CHECKS and not CHECKS:
        pytest.skip("TORCHTPU_DIST_CHECKS=0: gloo aborts on mismatched element counts")
    ranks.assert_passed(two_ranks, check)


@pytest.mark.parametrize("check", ["default_backend_is_tpu", "mesh_2x2"] + FOUR_SAME)
def test_four_ranks(four_ranks, check):
    ranks.assert_passed(four_ranks, check)


def test_registration():
    assert "tpu" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu"
    assert dist.Backend.backend_capability["tpu"] == ["tpu"]
    assert dist.Backend._plugins["TPU"].extended_api
    assert torch._utils._get_available_device_type() == "tpu"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
