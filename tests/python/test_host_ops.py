"""Small integer ops whose shapes keep changing at a call site run on the host (csrc/aten/
host_ops.cc), and reads of small views download their storage (csrc/aten/ops_copy.cc): a loop
lengthening a sequence by one compiles a bounded number of programs, with PyTorch's values."""

import pytest
import torch

import torchtpu
from conftest import run_python

pytestmark = pytest.mark.usefixtures("host_ops")


def _misses():
    return torchtpu.metrics()["executable_cache_misses"]


def _host_ops():
    return torchtpu.metrics()["host_ops"]


def test_growing_sequence_compiles_a_bounded_number_of_programs(each_eager_mode):
    """What generate() does at each token: append the next id, derive positions and a mask from
    the sequence's last element and its length. 40 lengths compile what the first two did."""
    def loop(device, steps):
        ids = torch.arange(3, device=device).view(1, 3) + 5
        out = []
        for _ in range(steps):
            last = ids[:, -1:]
            positions = torch.arange(ids.shape[1], device=device) + last
            mask = positions <= last * 2
            ids = torch.cat([ids, (last * 7) % 11], dim=-1)
            out.append(mask.sum())
        return ids, torch.stack(out)

    expected = loop("cpu", 40)
    before, host = _misses(), _host_ops()
    got = loop("tpu", 40)
    ids = got[0].cpu()  # before counting: DeferAndFuse compiles what it deferred at the sync
    compiled = _misses() - before
    assert torch.equal(ids, expected[0]) and torch.equal(got[1].cpu(), expected[1])
    assert compiled <= 20, compiled  # the first two lengths' programs, per op or fused
    assert _host_ops() - host >= 38 * 4
    # Again, over the same lengths: each runs where it ran before, compiling nothing.
    before = _misses()
    again = loop("tpu", 40)
    assert torch.equal(again[0].cpu(), expected[0])
    assert _misses() == before


def test_a_few_shapes_at_one_line_stay_on_the_device(each_eager_mode):
    """Two shapes taking turns at one line compile twice and run there after, asynchronously:
    only a third shape at that line (a line whose shapes keep changing) goes to the host. (Sizes
    no other test here uses: a shape the host ran anywhere stays there.)"""
    # uploaded (values an op made on the host would keep their consumers there)
    xs = [torch.arange(n).to("tpu") for n in (77, 78)]
    for x in xs:  # compiles
        (x * 3).cpu()
    third = torch.arange(79).to("tpu")
    host = _host_ops()
    for _ in range(5):
        for x in xs:
            assert torch.equal((x * 3).cpu(), torch.arange(x.numel()) * 3)
    assert _host_ops() == host
    for _ in range(2):
        assert torch.equal((third * 3).cpu(), torch.arange(79) * 3)
    assert _host_ops() == host  # another line, its first shape


def test_a_shape_another_line_ran_on_the_host_stays_on_the_device_here(each_eager_mode):
    """The host's shapes are remembered per line: a loop over one fixed shape at another line
    (an evaluation over varying lengths, then training at one of them) stays on the device."""
    for n in range(130, 140):  # from the third length on, the host
        assert torch.equal((torch.arange(n, device="tpu") + 1).cpu(), torch.arange(n) + 1)
    x = torch.arange(135).to("tpu")
    host = _host_ops()
    for _ in range(4):
        assert torch.equal((x + 1).cpu(), torch.arange(135) + 1)
    assert _host_ops() == host


def test_small_integer_factories_are_made_on_the_host(each_eager_mode):
    """arange and fills of new integer tensors up to 4 KiB: no program, whatever the size, and
    the CPU's values and errors (a fill by a float truncates; one out of the dtype's range
    raises)."""
    before, host = _misses(), _host_ops()
    for n in range(1, 30):
        assert torch.equal(torch.arange(n, device="tpu").cpu(), torch.arange(n))
        assert torch.equal(torch.arange(2, 3 * n, 3, device="tpu").cpu(), torch.arange(2, 3 * n, 3))
        assert torch.equal(torch.full((2, n), 7, device="tpu").cpu(), torch.full((2, n), 7))
        assert torch.equal(torch.ones(n, dtype=torch.bool, device="tpu").cpu(),
                           torch.ones(n, dtype=torch.bool))
    x = torch.empty(5, dtype=torch.int32, device="tpu").fill_(2.7)
    assert x.cpu().tolist() == [2] * 5
    assert _misses() == before and _host_ops() - host == 4 * 29 + 1
    with pytest.raises(RuntimeError, match="overflow"):
        torch.empty(3, dtype=torch.uint8, device="tpu").fill_(300)
    big = torch.arange(1000, device="tpu")  # 8 KB: the device's
    assert int(big.sum()) == 499500
    assert _host_ops() - host == 4 * 29 + 2  # the fill that raised ran on the host too


def test_values_made_on_the_host_stay_there(each_eager_mode):
    """A small integer op on values an op made on the host runs there too, whatever its shape
    history: it waits for nothing, and its consumer on the host waits for nothing either (in
    DeferAndFuse, no cut of the pending program)."""
    x = torch.ones(4, 4, device="tpu") @ torch.ones(4, 4, device="tpu")  # pending, on the device
    positions = torch.arange(6, device="tpu")  # made on the host
    flushes, host = torchtpu.metrics()["deferred_flushes"], _host_ops()
    shifted = (positions + 1) * 2
    mask = shifted[None, :] <= shifted[:, None]
    assert torchtpu.metrics()["deferred_flushes"] == flushes
    assert _host_ops() - host == 3
    expected = (torch.arange(6) + 1) * 2
    assert torch.equal(mask.cpu(), expected[None, :] <= expected[:, None])
    assert torch.equal(x.cpu(), torch.full((4, 4), 4.0))


def test_values_made_on_the_host_meet_ready_device_values_there(each_eager_mode):
    """generate()'s stopping criteria: a flag made on the host, or-ed with a result the device
    has finished, runs on the host (a read of a value outside any pending program cuts no
    program), compiling nothing, and what follows from it stays there. A device value that a pending program still
    has to compute keeps the op on the device, beside that program."""
    at_eos = torch.tensor([3, 9]).to("tpu") == 9  # on the device
    torch.tpu.synchronize()  # and done
    x = torch.ones(4, 4, device="tpu") @ torch.ones(4, 4, device="tpu")  # pending in DeferAndFuse
    flags = torch.zeros(2, dtype=torch.bool, device="tpu")  # made on the host
    host, misses = _host_ops(), _misses()
    done = flags | at_eos
    unfinished = torch.ones(2, dtype=torch.long, device="tpu") & ~done
    assert _host_ops() - host == 4  # |, ones, ~, &
    assert _misses() == misses
    assert bool(unfinished.max() == 0) is False
    assert torch.equal(unfinished.cpu(), torch.tensor([1, 0]))
    assert torch.equal(x.cpu(), torch.full((4, 4), 4.0))

    pending = (x.sum() > 0).long()  # integer, but not computed yet in DeferAndFuse
    host = _host_ops()
    both = pending + unfinished
    if torchtpu.get_eager_mode() == "defer_and_fuse":
        assert _host_ops() == host  # recorded beside the work it needs
    assert torch.equal(both.cpu(), torch.tensor([2, 1]))


def test_a_training_step_over_varying_lengths_keeps_one_program_per_length():
    """DeferAndFuse runs a transformer step (its causal mask from torch.ones(n, n).tril()) as one
    program per length: the mask's ops go to the host together (the fill too, where the line's
    sizes keep changing), so no host op cuts the step's pending program in two."""
    from test_buckets import Block

    torch.manual_seed(0)
    model = Block().to("tpu")
    lengths = range(70, 80)  # masks of more than 4 KiB
    with torchtpu.eager_mode("defer_and_fuse"):
        for n in lengths:
            idx = torch.randint(0, 40, (2, n), generator=torch.Generator().manual_seed(n))
            before = torchtpu.metrics()["deferred_flushes"]
            loss, _ = model(idx.to("tpu"), idx.to("tpu"))
            loss.backward()
            loss.item()
            assert torchtpu.metrics()["deferred_flushes"] - before <= 1, n
    assert _host_ops() > 0


def test_reading_elements_of_a_vector_compiles_nothing(each_eager_mode):
    """x[i].item() for every i: the storage is downloaded and viewed on the host, no program
    per offset."""
    x = torch.arange(50, dtype=torch.float32, device="tpu") * 0.5
    columns = torch.arange(12, device="tpu").view(3, 4)
    x.cpu()
    before = _misses()
    values = [x[i].item() for i in range(50)]
    got = [columns[:, j].tolist() for j in range(4)]
    assert _misses() == before
    assert values == [i * 0.5 for i in range(50)]
    assert got == torch.arange(12).view(3, 4).t().tolist()


def test_floating_and_large_work_stays_on_the_device(each_eager_mode):
    """Only integer and boolean tensors of at most 256 KiB go to the host: floating point work
    (its rounding is the device's) and large integer tensors compile per shape, as before."""
    host = _host_ops()
    for n in range(3, 9):
        x = torch.full((n,), 1.5, device="tpu")
        assert torch.equal((x * 2).cpu(), torch.full((n,), 3.0))
    for n in (40_000, 40_001, 40_002):  # 320 KiB of int64
        x = torch.ones(n, dtype=torch.int64, device="tpu")
        assert int((x + 1).sum()) == 2 * n
    assert _host_ops() == host


def test_random_integer_ops_stay_on_the_device():
    """randint draws from the device's generator, whatever its shapes."""
    host = _host_ops()
    for n in range(3, 9):
        torch.manual_seed(1)
        a = torch.randint(0, 100, (n,), device="tpu")
        torch.manual_seed(1)
        b = torch.randint(0, 100, (n,), device="tpu")
        assert torch.equal(a.cpu(), b.cpu())
    assert _host_ops() == host


def test_host_ops_keep_pytorch_semantics(each_eager_mode):
    """In place, out=, several outputs, views of other tensors' storages, and the CPU's errors."""
    host = _host_ops()
    for n in range(3, 8):
        base = torch.arange(2 * n, device="tpu").view(2, n)
        ref = torch.arange(2 * n).view(2, n)
        view = base[:, 1:]
        view.add_(3)
        ref[:, 1:].add_(3)
        assert torch.equal(base.cpu(), ref)
        out = torch.empty(0, dtype=torch.int64, device="tpu")
        torch.cumsum(base[1], 0, out=out)
        assert torch.equal(out.cpu(), torch.cumsum(ref[1], 0))
        values, indices = torch.sort(base[0], descending=True)
        expected = torch.sort(ref[0], descending=True)
        assert torch.equal(values.cpu(), expected.values)
        assert torch.equal(indices.cpu(), expected.indices)
        copy = base[:, -2:].clone()
        assert torch.equal(copy.cpu(), ref[:, -2:]) and copy.is_contiguous()
    assert _host_ops() - host >= 3 * 5  # from the third size on
    for n in range(3, 7):
        x = torch.arange(n, device="tpu")
        with pytest.raises(IndexError):
            x[torch.tensor([n + 2], device="tpu")].cpu()
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            (x // torch.zeros(n, dtype=torch.int64, device="tpu")).cpu()


def test_no_host_ops_in_a_captured_graph():
    torch._dynamo.reset()

    @torch.compile(backend="tpu", dynamic=False)
    def step(ids):
        return torch.cat([ids, ids[:, -1:] + 1], dim=-1)

    ids = torch.zeros(1, 2, dtype=torch.int64, device="tpu")
    host = _host_ops()
    for _ in range(5):
        ids = step(ids)
    assert ids.cpu().tolist() == [[0, 0, 1, 2, 3, 4, 5]]
    assert _host_ops() == host
    torch._dynamo.reset()


def test_host_ops_off_compiles_per_shape():
    r = run_python("""
        import torch, torchtpu
        ids = torch.zeros(1, 2, dtype=torch.int64, device="tpu")
        before = torchtpu.metrics()["executable_cache_misses"]
        for _ in range(10):
            ids = torch.cat([ids, ids[:, -1:] + 1], dim=-1)
        print(ids.cpu().tolist(), torchtpu.metrics()["executable_cache_misses"] - before,
              torchtpu.metrics()["host_ops"])
    """, TORCHTPU_HOST_OPS="0", TORCHTPU_EAGER_MODE="strict")
    assert r.returncode == 0, r.stderr
    ids, compiled, host = r.stdout.rsplit(" ", 2)
    assert ids == str([[0, 0] + list(range(1, 11))])
    assert int(compiled) >= 20 and int(host) == 0


def test_host_ops_run_on_the_calling_thread_alone():
    """A host op's CPU kernel starts no OpenMP parallel region (whose threads would spin beside
    the device's on the same cores), and leaves the thread's own setting as it was: the same
    tril on CPU tensors still starts OpenMP's threads."""
    r = run_python("""
        import os, torch, torchtpu
        def threads():
            return len(os.listdir("/proc/self/task"))
        torch.set_num_threads(2)
        masks = [torch.ones(64, 64, dtype=torch.bool, device="tpu").tril() for _ in range(4)]
        got = masks[-1].cpu()
        assert torchtpu.metrics()["host_ops"] >= 8, torchtpu.metrics()["host_ops"]
        before = threads()
        assert torch.get_num_threads() == 2
        assert torch.equal(got, torch.ones(64, 64, dtype=torch.bool).tril())
        print(before, threads())
    """, TORCHTPU_HOST_OPS="1", OMP_NUM_THREADS=None)
    assert r.returncode == 0, r.stdout + r.stderr
    before, after = map(int, r.stdout.split())
    assert after > before  # OpenMP's worker, started only by the CPU tensors' tril
