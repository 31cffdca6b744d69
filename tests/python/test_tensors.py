"""Storages, copies and views: every result must match the same computation on CPU."""

import io

import pytest
import torch

from conftest import ALL_DTYPES, sample


@pytest.mark.parametrize("dtype", ALL_DTYPES + [torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0, 3), (4, 5)])
def test_round_trip(dtype, shape):
    cpu = sample(shape, dtype) if dtype not in (torch.uint16, torch.uint32, torch.uint64) \
        else torch.arange(int(torch.tensor(shape).prod()) if shape else 1).reshape(shape).to(dtype)
    back = cpu.to("tpu").cpu()
    assert back.dtype == dtype and back.shape == cpu.shape
    assert torch.equal(back, cpu)


@pytest.mark.parametrize("src_dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16])
@pytest.mark.parametrize("dst_dtype", [torch.float64, torch.int32, torch.uint8, torch.bool,
                                       torch.float16])
def test_copy_converts_dtypes_on_device(src_dtype, dst_dtype):
    cpu = sample((3, 4), src_dtype)
    if dst_dtype == torch.uint8 and src_dtype != torch.bool:
        cpu = cpu.abs()  # negative floats to uint8 are undefined in C++, on CPU too
    dst = torch.empty(3, 4, dtype=dst_dtype, device="tpu")
    dst.copy_(cpu.to("tpu"))
    assert torch.equal(dst.cpu(), torch.empty(3, 4, dtype=dst_dtype).copy_(cpu))


def test_copy_broadcasts_and_writes_through_views():
    x = torch.zeros(4, 5, device="tpu")
    x[1:3, ::2].copy_(torch.tensor([1.0, 2.0, 3.0]))  # cpu source, broadcast into a view
    ref = torch.zeros(4, 5)
    ref[1:3, ::2].copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(x.cpu(), ref)
    x.t()[0].copy_(torch.arange(4.0, device="tpu"))  # tpu source into a strided view
    ref.t()[0].copy_(torch.arange(4.0))
    assert torch.equal(x.cpu(), ref)


def test_non_contiguous_cpu_sources_and_destinations():
    cpu = torch.arange(24.0).reshape(2, 3, 4)
    assert torch.equal(cpu.permute(2, 0, 1).to("tpu").cpu(), cpu.permute(2, 0, 1))
    dst = torch.zeros(4, 3).t()
    dst.copy_(torch.arange(12.0, device="tpu").reshape(3, 4))
    assert torch.equal(dst, torch.arange(12.0).reshape(3, 4))


VIEWS = {
    "t": lambda x: x.t(),
    "permute": lambda x: x.reshape(2, 3, 4).permute(1, 2, 0),
    "slice_step": lambda x: x[1:, ::3],
    "select": lambda x: x[:, 2],
    "expand": lambda x: x[:1].expand(5, 12),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(1).squeeze(1)[::2],
    "narrow": lambda x: x.narrow(1, 4, 5),
    "diagonal": lambda x: x.diagonal(),
    "as_strided_overlap": lambda x: x.as_strided((5, 5), (2, 1), 3),
    "unfold": lambda x: x.reshape(-1).unfold(0, 4, 3),
    "view_dtype": lambda x: x.view(torch.int32),
    "reshape": lambda x: x.t().reshape(-1),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_read_like_cpu(name):
    cpu = torch.arange(24.0).reshape(2, 12) * 1.5
    dev = cpu.to("tpu")
    expected = VIEWS[name](cpu)
    got = VIEWS[name](dev)
    assert got.shape == expected.shape and got.stride() == expected.stride()
    assert got.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr() or \
        name == "reshape"
    assert torch.equal(got.cpu(), expected)


def test_complex_views():
    cpu = torch.randn(3, 4, dtype=torch.complex64)
    dev = cpu.to("tpu")
    assert torch.equal(torch.view_as_real(dev).cpu(), torch.view_as_real(cpu))
    real = torch.randn(3, 2)
    assert torch.equal(torch.view_as_complex(real.to("tpu")).cpu(), torch.view_as_complex(real))


def test_views_are_metadata_only():
    x = torch.arange(6.0, device="tpu").reshape(2, 3)
    y = x.t()
    assert y.is_contiguous() is False
    assert y.data_ptr() == x.data_ptr()
    assert torch.equal(y.cpu(), torch.arange(6.0).reshape(2, 3).t())


@pytest.mark.parametrize("op", ["add_", "mul_", "fill_", "zero_", "copy_"])
def test_in_place_through_views_updates_every_alias(op):
    def apply(t):
        v = t[:, 1::2]
        if op == "add_":
            v.add_(10)
        elif op == "mul_":
            v.t().mul_(torch.arange(3.0, device=t.device))
        elif op == "fill_":
            v.fill_(-1)
        elif op == "zero_":
            t.view(-1)[2:7].zero_()
        else:
            v.copy_(torch.ones(3, 1, device=t.device) * 4)
        return t

    cpu = torch.arange(18.0).reshape(3, 6)
    dev = cpu.to("tpu")
    alias = dev.t()
    apply(dev)
    apply(cpu)
    assert torch.equal(dev.cpu(), cpu)
    assert torch.equal(alias.cpu(), cpu.t())


def test_in_place_on_an_overlapping_view_raises_like_cpu():
    for device in ["cpu", "tpu"]:
        x = torch.zeros(3, device=device)
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            x[:1].expand(3, 3).add_(1)


def test_resize_keeps_contents_and_zero_fills_nothing_it_does_not_promise():
    x = torch.arange(4.0, device="tpu")
    x.resize_(2, 5)
    assert x.shape == (2, 5)
    assert x.view(-1)[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    e = torch.empty(0, device="tpu")
    e.resize_(3, 4).fill_(2)
    assert e.cpu().tolist() == [[2.0] * 4] * 3


def test_set_shares_the_storage():
    a = torch.arange(6.0, device="tpu")
    b = torch.empty(0, device="tpu")
    b.set_(a)
    b.add_(1)
    assert a.cpu().tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    c = torch.empty(0, device="tpu").set_(a.untyped_storage(), 2, (2, 2), (1, 2))
    assert c.cpu().tolist() == [[3.0, 5.0], [4.0, 6.0]]
    d = torch.ones(3, device="tpu").set_()
    assert d.shape == (0,)


def test_item_tolist_and_numpy():
    x = torch.tensor([[1.5, -2.0]], device="tpu")
    assert x[0, 1].item() == -2.0
    assert torch.tensor(7, device="tpu").item() == 7
    assert torch.tensor(True, device="tpu").item() is True
    assert x.tolist() == [[1.5, -2.0]]
    assert x.cpu().numpy().tolist() == [[1.5, -2.0]]
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted"):
        x.item()


def test_factories_and_fill():
    assert torch.zeros(2, 3, device="tpu").cpu().tolist() == [[0.0] * 3] * 2
    assert torch.ones(2, dtype=torch.int64, device="tpu").cpu().tolist() == [1, 1]
    assert torch.full((2,), 3.5, device="tpu").cpu().tolist() == [3.5, 3.5]
    assert torch.empty(2, 2, device="tpu").fill_(7).cpu().tolist() == [[7.0, 7.0]] * 2
    v = torch.tensor(4.0, device="tpu")
    assert torch.empty(3, device="tpu").fill_(v).cpu().tolist() == [4.0] * 3
    with pytest.raises(RuntimeError, match="fill_ only supports 0-dimension value tensor"):
        torch.empty(3, device="tpu").fill_(torch.ones(2, device="tpu"))
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8_t"):
        torch.empty(2, dtype=torch.uint8, device="tpu").fill_(300)


def test_clone_and_contiguous_copy_values_not_aliases():
    x = torch.arange(6.0, device="tpu").reshape(2, 3)
    c = x.clone()
    x.add_(1)
    assert c.cpu().tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    t = x.t().contiguous()
    assert t.is_contiguous() and t.cpu().tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]


def test_save_and_load_round_trip():
    x = torch.arange(5.0, device="tpu")
    buffer = io.BytesIO()
    torch.save(x, buffer)
    buffer.seek(0)
    y = torch.load(buffer)
    assert y.device.type == "tpu" and y.cpu().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    buffer.seek(0)
    assert torch.load(buffer, map_location="cpu").tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


# pickle.dumps of a tpu tensor (and torch.save's legacy format) writes each storage through a
# tensor that at::from_blob makes of the storage's address; it had raised "this storage was not
# allocated by torchtpu". A view keeps its strides and offset, and a module pickles whole.
def test_pickle_and_the_legacy_save_format(tmp_path):
    import pickle

    view = torch.arange(12.0, device="tpu").view(3, 4)[:, 1:]
    got = pickle.loads(pickle.dumps(view))
    assert got.device.type == "tpu" and torch.equal(got.cpu(), view.cpu())
    assert got.stride() == view.stride() and got.storage_offset() == view.storage_offset()
    model = torch.nn.Linear(3, 2).to("tpu")
    copied = pickle.loads(pickle.dumps(model))
    assert torch.equal(copied.weight.cpu(), model.weight.cpu())
    torch.save(view, tmp_path / "legacy.pt", _use_new_zipfile_serialization=False)
    assert torch.equal(torch.load(tmp_path / "legacy.pt").cpu(), view.cpu())


def test_data_pointers_are_distinct_and_never_host_memory():
    a = torch.empty(100, device="tpu")
    b = torch.empty(100, device="tpu")
    assert abs(a.data_ptr() - b.data_ptr()) >= 400
    assert a.untyped_storage().nbytes() == 400


def test_cpu_and_tpu_tensors_have_compatible_shallow_copy_types():
    cpu, tpu = torch.zeros(1), torch.zeros(1, device="tpu")
    assert torch._has_compatible_shallow_copy_type(cpu, tpu)
    assert torch._has_compatible_shallow_copy_type(tpu, cpu)
    assert torch._has_compatible_shallow_copy_type(tpu, tpu)
    assert not torch._has_compatible_shallow_copy_type(tpu, torch.zeros(1, device="meta"))


def test_assigning_data_moves_a_parameter_in_place():
    p = torch.nn.Parameter(torch.zeros(3))
    p.data = torch.tensor([1.0, 2.0, 3.0], device="tpu")
    assert isinstance(p, torch.nn.Parameter) and p.device.type == "tpu" and p.requires_grad
    (p * p).sum().backward()
    assert p.grad.device.type == "tpu"
    assert torch.equal(p.grad.cpu(), torch.tensor([2.0, 4.0, 6.0]))
    p.data = p.data.cpu()
    assert p.device.type == "cpu" and torch.equal(p.detach(), torch.tensor([1.0, 2.0, 3.0]))
