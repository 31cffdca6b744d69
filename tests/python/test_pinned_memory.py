"""Pinned host memory for "tpu" and non_blocking copies, with CUDA's semantics: pin_memory()
gives memory the runtime knows (is_pinned), a non_blocking copy from or into it returns before
the copy is done, and synchronize() or an event recorded after it waits for it; from other memory
a non_blocking copy is an ordinary, synchronous one."""


import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

N = 32 * 1024 * 1024  # 128 MB of float32: a copy that takes milliseconds


def test_pin_memory_gives_pinned_memory():
    x = torch.randn(8)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert torch.equal(p, x) and p.data_ptr() != x.data_ptr()
    assert p[3:].is_pinned() and p.view(2, 4).t().is_pinned()
    assert p.pin_memory().data_ptr() == p.data_ptr()  # already pinned: itself
    assert p.data_ptr() % 4096 == 0
    assert torch.empty(5, pin_memory=True).is_pinned()
    assert not torch.empty(5).is_pinned()


def test_pinned_memory_outlives_its_first_tensor():
    p = torch.arange(1 << 20, dtype=torch.float32).pin_memory()
    view = torch.empty(0).set_(p.untyped_storage(), 0, p.shape)  # the same memory
    del p
    assert view.is_pinned() and view[-1].item() == (1 << 20) - 1


def test_pin_memory_with_device_argument():
    x = torch.randn(8)
    with pytest.warns(Warning):  # PyTorch deprecates the argument, but honours it
        p = x.pin_memory("tpu")
    assert p.is_pinned()
    assert x.is_pinned("tpu") is False


def test_dataloader_pin_memory():
    data = TensorDataset(torch.arange(40.0).reshape(10, 4), torch.arange(10))
    loader = DataLoader(data, batch_size=4, pin_memory=True)
    batches = list(loader)
    assert all(x.is_pinned() and y.is_pinned() for x, y in batches)
    assert torch.equal(torch.cat([x for x, _ in batches]), data.tensors[0])
    moved = [x.to("tpu", non_blocking=True) for x, _ in batches]
    torch.tpu.synchronize()
    assert torch.equal(torch.cat([m.cpu() for m in moved]), data.tensors[0])


@pytest.mark.parametrize("shape", [(7,), (3, 5)])
def test_non_blocking_upload_is_correct(each_eager_mode, shape):
    x = torch.randn(shape)
    p = x.pin_memory()
    y = p.to("tpu", non_blocking=True)
    z = torch.zeros((2,) + shape, device="tpu")
    z[1].copy_(p, non_blocking=True)  # into part of a storage
    w = p.to("tpu", torch.float64, non_blocking=True)  # through a conversion
    torch.tpu.synchronize()
    p.fill_(0)  # after synchronize the source is the user's again
    assert torch.equal(y.cpu(), x)
    assert torch.equal(z[1].cpu(), x) and torch.equal(z[0].cpu(), torch.zeros(shape))
    assert torch.equal(w.cpu(), x.double())
    assert torch.equal((y * 2).cpu(), x * 2)


def test_non_blocking_upload_returns_before_the_copy_is_done():
    p = torch.randn(N).pin_memory()
    expected = p[-4:].clone()
    torch.tpu.synchronize()
    sync = p.to("tpu")
    y = p.to("tpu", non_blocking=True)
    done = torch.tpu.Event()
    done.record()
    in_flight = not done.query()
    done.synchronize()
    assert done.query()
    assert in_flight  # returned while the copy still ran (no timing: this machine is shared)
    assert torch.equal(y[-4:].cpu(), expected) and torch.equal(sync[-4:].cpu(), expected)


def test_non_blocking_upload_of_a_freed_pinned_tensor():
    g = torch.Generator().manual_seed(3)
    y = torch.randn(N // 4, generator=g).pin_memory().to("tpu", non_blocking=True)
    # The pinned tensor is gone already; its memory stays until the copy has read it.
    torch.tpu.synchronize()
    g.manual_seed(3)
    assert torch.equal(y.cpu(), torch.randn(N // 4, generator=g))


def test_non_blocking_from_unpinned_memory_is_synchronous():
    x = torch.randn(N // 4)
    expected = x[:8].clone()
    y = x.to("tpu", non_blocking=True)
    x.fill_(0)  # not pinned: the copy was done before the call returned
    assert torch.equal(y[:8].cpu(), expected)


def test_non_blocking_download_into_pinned_memory(each_eager_mode):
    x = torch.randn(3, 5)
    t = x.to("tpu") * 2
    out = torch.empty(3, 5, pin_memory=True)
    out.copy_(t, non_blocking=True)
    part = torch.zeros(2, 3, 5, pin_memory=True)
    part[1].copy_(t, non_blocking=True)
    moved = t.to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(out, x * 2) and torch.equal(part[1], x * 2)
    assert torch.equal(part[0], torch.zeros(3, 5))
    assert torch.equal(moved, x * 2)


def test_non_blocking_download_returns_before_the_copy_is_done():
    t = torch.randn(N, device="tpu")
    out = torch.empty(N, pin_memory=True)
    torch.tpu.synchronize()
    out.copy_(t)
    expected = out[-4:].clone()
    out.zero_()
    out.copy_(t, non_blocking=True)
    done = torch.tpu.current_stream().record_event()
    in_flight = not done.query()
    done.synchronize()
    assert torch.equal(out[-4:], expected)
    assert in_flight


def test_freed_pinned_memory_is_reused():
    """Freed blocks are kept by size (a new block page-faults on its first write)."""
    p = torch.empty(1 << 20, pin_memory=True)
    address = p.data_ptr()
    del p
    held = [torch.empty(1 << 20, pin_memory=True) for _ in range(16)]
    assert address in [h.data_ptr() for h in held] and held[0].is_pinned()


def _adopted(values):
    """A tpu tensor holding `values` through _adopt_pinned, and the pinned block's address."""
    import torchtpu

    src = values.pin_memory()
    dst = torch.empty_like(values, device="tpu")
    torchtpu._C._adopt_pinned(src, dst)
    return dst, src.data_ptr()


def test_adopted_pinned_memory_is_not_reused_while_the_tensor_lives(each_eager_mode):
    values = torch.arange(1 << 16, dtype=torch.float32)
    dst, address = _adopted(values)
    # The block stays with the tpu tensor: new blocks of its size are other memory, and writing
    # them changes nothing.
    others = [torch.full((1 << 16,), -1.0).pin_memory() for _ in range(3)]
    assert all(o.data_ptr() != address for o in others)
    assert torch.equal(dst.cpu(), values)
    dst.mul_(2)  # an in-place op does not hand the borrowed memory to its result
    del others
    assert torch.equal(dst.cpu(), values * 2)
    assert torch.equal((dst + 1).cpu(), values * 2 + 1)


def test_adopted_pinned_memory_returns_when_the_tensor_dies():
    dst, address = _adopted(torch.arange(1 << 16, dtype=torch.float32))
    del dst
    torch.tpu.synchronize()
    # Other freed blocks of this size may come first; held at once, they reach it.
    held = [torch.empty(1 << 16, pin_memory=True) for _ in range(64)]
    assert address in [h.data_ptr() for h in held]


@pytest.mark.parametrize("case", ["unpinned", "non_contiguous", "view"])
def test_adopt_pinned_copies_what_it_cannot_adopt(case):
    import torchtpu

    values = torch.arange(24, dtype=torch.float32).view(4, 6)
    src = values.pin_memory()
    dst = torch.zeros(4, 6, device="tpu")
    target = dst
    if case == "unpinned":
        src = values.clone()
    elif case == "non_contiguous":
        src, target, values = src.t(), torch.zeros(6, 4, device="tpu"), values.t()
    else:  # a view that does not cover its storage
        big = torch.zeros(8, 6, device="tpu")
        target = big[2:6]
    torchtpu._C._adopt_pinned(src, target)
    assert torch.equal(target.cpu(), values)
    if case == "view":
        assert torch.equal(big[:2].cpu(), torch.zeros(2, 6))


def test_adopt_pinned_refuses_other_shapes():
    import torchtpu

    with pytest.raises(RuntimeError, match="same shape"):
        torchtpu._C._adopt_pinned(torch.zeros(3).pin_memory(), torch.zeros(4, device="tpu"))
