"""Nested tensors on tpu (csrc/aten/ops_nested.cc): what nn.TransformerEncoder's inference fast
path makes of a padded batch with a key padding mask, and its layers on it, against the CPU, in
every eager mode, without the CPU fallback and without a program per set of lengths; the ops'
own errors; and nested tensors of other shapes, through the CPU's kernels."""

import copy

import pytest
import torch
from conftest import assert_same_as_cpu

import torchtpu

pytestmark = pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")

E, H = 16, 4


def _encoder(norm_first=False, activation="relu", final_norm=False):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, activation=activation,
                                             norm_first=norm_first, batch_first=True)
    norm = torch.nn.LayerNorm(E) if final_norm else None
    return torch.nn.TransformerEncoder(layer, 2, norm=norm, enable_nested_tensor=True).eval()


def _padding(lengths, length):
    return torch.arange(length)[None, :] >= torch.tensor(lengths)[:, None]


def _run(encoder, x, padding, device):
    encoder = copy.deepcopy(encoder).to(device)
    with torch.no_grad():
        return encoder(x.to(device), src_key_padding_mask=padding.to(device)).cpu()


def _fallbacks():
    return torchtpu.metrics()["cpu_fallback_calls"]


@pytest.mark.parametrize("norm_first,activation,final_norm",
                         [(False, "relu", False), (True, "gelu", False), (False, "gelu", True)])
@pytest.mark.parametrize("lengths", [[7, 3, 5], [7, 7, 7], [1, 7, 0], [0, 0, 2]])
def test_encoder_with_a_padding_mask_matches_cpu(each_eager_mode, norm_first, activation,
                                                 final_norm, lengths):
    """Padded positions come out as the CPU's zeros (or its final norm of zeros), a batch
    entry padded throughout included, and nothing runs on the CPU. (With norm_first the encoder
    takes no nested tensor: its layers get the mask, and a batch entry padded throughout is NaN,
    on both.)"""
    encoder = _encoder(norm_first, activation, final_norm)
    x = torch.randn(3, 7, E, generator=torch.Generator().manual_seed(1))
    padding = _padding(lengths, 7)
    expected = _run(encoder, x, padding, "cpu")
    before = _fallbacks()
    got = _run(encoder, x, padding, "tpu")
    assert _fallbacks() == before
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e38])
def test_values_in_padded_positions_do_not_reach_real_rows(each_eager_mode, value):
    """The CPU never packs padded positions; on tpu they are zeros before each layer (attention
    weighs them by 0, and 0 * NaN would be NaN)."""
    encoder = _encoder()
    x = torch.randn(2, 5, E, generator=torch.Generator().manual_seed(2))
    x[1, 3:] = value
    padding = _padding([5, 3], 5)
    torch.testing.assert_close(_run(encoder, x, padding, "tpu"), _run(encoder, x, padding, "cpu"),
                               rtol=1e-5, atol=1e-5)


def test_new_lengths_compile_nothing(each_eager_mode):
    """The layers run at the padded shape: a batch with other lengths reuses every program."""
    encoder = _encoder().to("tpu")
    x = torch.randn(4, 9, E, device="tpu")
    with torch.no_grad():
        for lengths in ([9, 2, 5, 1], [9, 9, 9, 9]):  # warm-up: every program the encoder runs
            encoder(x, src_key_padding_mask=_padding(lengths, 9).to("tpu")).cpu()
        compiled = torchtpu.metrics()["executables_compiled"]
        for lengths in ([3, 8, 2, 9], [1, 1, 1, 6], [9, 0, 4, 4]):
            expected = _run(_encoder(), x.cpu(), _padding(lengths, 9), "cpu")
            got = encoder(x, src_key_padding_mask=_padding(lengths, 9).to("tpu")).cpu()
            torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert torchtpu.metrics()["executables_compiled"] == compiled


MASKS = {
    "left_aligned": lambda: _padding([4, 2, 0], 4).logical_not(),
    "gap": lambda: torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]], dtype=torch.bool),
    "float": lambda: _padding([4, 2, 0], 4).logical_not().float(),
    "three_dims": lambda: _padding([4, 2, 0], 4).logical_not()[:, :, None],
    "wrong_rows": lambda: _padding([4, 2], 4).logical_not(),
}


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("mask_check", [True, False])
def test_nested_tensor_from_mask(mask, mask_check):
    """Its sizes and values (padded back), or the CPU's error: a gap in a row of the mask when
    mask_check is set (without it, each row's count of true entries from its start)."""
    x = torch.randn(3, 4, 5)

    def fn(device):
        nested = torch._nested_tensor_from_mask(x.to(device), MASKS[mask]().to(device),
                                                mask_check=mask_check)
        return nested._nested_tensor_size(), nested.to_padded_tensor(0.0)
    assert_same_as_cpu(fn)


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_nested_tensor_from_mask_left_aligned(mask):
    x = torch.randn(3, 4, 5)
    assert_same_as_cpu(lambda device: torch._nested_tensor_from_mask_left_aligned(
        x.to(device), MASKS[mask]().to(device)))


@pytest.mark.parametrize("shape", [(2, 0, 3), (0, 4, 3)])
def test_from_mask_of_empty_inputs(shape):
    """No positions: select's IndexError, as on the CPU; no rows: the CPU's RuntimeError (and a
    left-aligned mask)."""
    x, mask = torch.randn(shape), torch.ones(shape[:2], dtype=torch.bool)
    assert_same_as_cpu(lambda device: torch._nested_tensor_from_mask(x.to(device),
                                                                     mask.to(device)))
    assert_same_as_cpu(lambda device: torch._nested_tensor_from_mask_left_aligned(
        x.to(device), mask.to(device)))


def test_from_mask_copies_its_input():
    """The nested tensor does not share the input's memory (the CPU's packs the rows)."""
    x = torch.randn(2, 3, 4, device="tpu")
    nested = torch._nested_tensor_from_mask(x, _padding([3, 1], 3).logical_not().to("tpu"))
    expected = nested.to_padded_tensor(0.0).cpu()
    x.add_(1)
    torch.testing.assert_close(nested.to_padded_tensor(0.0).cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("padding,output_size", [
    (0.0, None), (float("nan"), (2, 5, 3)), (2.7, (3, 4, 6)), (-1.0, (2, 2, 3)),
    (0.0, (2, 4)), (0.0, (2, 4, 3, 1))])
def test_to_padded_tensor(dtype, padding, output_size):
    """Padding cast to the dtype (2.7 pads integers with 2), a larger output_size, and the CPU's
    errors for a smaller one or one of other dimensions."""
    x = torch.randn(2, 4, 3).mul(10).to(dtype)
    mask = _padding([3, 1], 4).logical_not()

    def fn(device):
        nested = torch._nested_tensor_from_mask(x.to(device), mask.to(device))
        return nested.to_padded_tensor(padding, output_size)
    assert_same_as_cpu(fn)


@pytest.mark.parametrize("shapes", [[(3, 4), (1, 4), (0, 4)], [(2,), (5,)], [(2, 3, 1), (1, 2, 2)]])
def test_other_nested_tensors_pad_as_on_the_cpu(shapes):
    """Nested tensors made from lists (packed, of any shape) pad on the device too."""
    parts = [torch.randn(s, generator=torch.Generator().manual_seed(i))
             for i, s in enumerate(shapes)]
    assert_same_as_cpu(lambda device: torch.nested.nested_tensor(
        [p.to(device) for p in parts]).to_padded_tensor(-3.0))


def _long(*shape):
    return torch.ones(shape, dtype=torch.int64)


EDGES = {
    "no_matrices": lambda d: torch.nested.nested_tensor([], device=d).to_padded_tensor(0.0),
    "no_elements": lambda d: torch.nested.nested_tensor(
        [torch.zeros(2, 0), torch.zeros(3, 0)]).to(d).to_padded_tensor(0.0),
    "all_padding": lambda d: torch._nested_tensor_from_mask(
        torch.ones(2, 3, 2, device=d), torch.zeros(2, 3, dtype=torch.bool, device=d)
    ).to_padded_tensor(0.0),
    "nan_into_integers_unused": lambda d: torch._nested_tensor_from_mask(
        _long(2, 3, 2).to(d), torch.ones(2, 3, dtype=torch.bool, device=d)
    ).to_padded_tensor(float("nan")),
    "nan_into_integers_used": lambda d: torch.nested.nested_tensor(
        [_long(2, 3), _long(1, 3)]).to(d).to_padded_tensor(float("nan")),
    "nan_into_integers_output_size": lambda d: torch.nested.nested_tensor(
        [_long(2, 3)]).to(d).to_padded_tensor(float("nan"), (1, 2, 4)),
}


@pytest.mark.parametrize("case", sorted(EDGES))
def test_to_padded_tensor_edges(case):
    """No matrices; matrices without elements (the CPU's error, a batch padded throughout
    included); a padding value that does not fit the dtype, an error only where it is used."""
    assert_same_as_cpu(EDGES[case])


def test_encoder_layer_on_a_packed_nested_tensor():
    """A nested tensor made from a list (its matrices packed, of unequal lengths) goes through
    the layer padded too."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, batch_first=True).eval()
    parts = [torch.randn(n, E) for n in (5, 2, 4)]

    def fn(device):
        with torch.no_grad():
            out = copy.deepcopy(layer).to(device)(
                torch.nested.nested_tensor([p.to(device) for p in parts]))
        return out.to_padded_tensor(0.0)
    expected = fn("cpu")
    before = _fallbacks()
    got = fn("tpu").cpu()
    assert _fallbacks() == before
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_encoder_layer_refuses_a_mask_with_a_nested_input():
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, batch_first=True).eval()
    a = layer.self_attn
    weights = [a.in_proj_weight, a.in_proj_bias, a.out_proj.weight, a.out_proj.bias]
    rest = [layer.norm1.weight, layer.norm1.bias, layer.norm2.weight, layer.norm2.bias,
            layer.linear1.weight, layer.linear1.bias, layer.linear2.weight, layer.linear2.bias]

    def fn(device):
        nested = torch._nested_tensor_from_mask(
            torch.randn(2, 3, E).to(device), _padding([3, 1], 3).logical_not().to(device))
        with torch.no_grad():
            return torch._transformer_encoder_layer_fwd(
                nested, E, H, *[w.to(device) for w in weights], False, False, 1e-5,
                *[w.to(device) for w in rest], torch.zeros(3, 3, dtype=torch.bool).to(device), 0)
    with pytest.raises(RuntimeError, match="NestedTensor with mask is not supported yet"):
        fn("tpu")
    assert_same_as_cpu(fn, values=False)


def test_other_ops_take_the_nested_view_as_the_cpu_takes_its_packed_tensor():
    """Ops without a tpu kernel run on the CPU on a packed copy of torchtpu's nested view, as
    the CPU's kernels need (its to_padded_tensor, for one, refuses other layouts)."""
    x = torch.randn(3, 4, 5)
    mask = _padding([4, 1, 2], 4).logical_not()

    def fn(device):
        nested = torch._nested_tensor_from_mask(x.to(device), mask.to(device))
        return [part for part in (nested * 2).unbind()]
    assert_same_as_cpu(fn)


def _from_mask(device, lengths=(4, 1, 2), dtype=torch.float32):
    x = torch.arange(3 * 4 * 5, dtype=dtype).view(3, 4, 5)
    mask = _padding(lengths, 4).logical_not()
    return torch._nested_tensor_from_mask(x.to(device), mask.to(device))


COPIES = {
    "to_cpu": lambda d: _from_mask(d).cpu(),
    "to_float64": lambda d: _from_mask(d).to(torch.float64),
    "clone": lambda d: _from_mask(d).clone(),
    "cat": lambda d: torch.cat([_from_mask(d), _from_mask(d)]),
    "copy_into_packed": lambda d: torch.nested.nested_tensor(
        [torch.zeros(4, 5), torch.zeros(1, 5), torch.zeros(2, 5)]).to(d).copy_(_from_mask(d)),
    "copy_into_view": lambda d: _from_mask(d).copy_(torch.nested.nested_tensor(
        [torch.ones(4, 5), torch.ones(1, 5), torch.ones(2, 5)]).to(d)),
    "copy_other_sizes": lambda d: _from_mask(d).copy_(_from_mask(d, (4, 2, 2))),
}


@pytest.mark.parametrize("case", sorted(COPIES))
def test_copies_of_the_nested_view(case):
    """The view copies to other devices and dtypes, into and from packed nested tensors, and
    through ops on lists of nested tensors, as the CPU's packed one does."""
    def fn(d):
        out = COPIES[case](d)
        return out.cpu().to_padded_tensor(-1.0)
    assert_same_as_cpu(fn)


IN_PLACE = {
    "mul_": lambda t: t.mul_(2),
    "add_": lambda t: t.add_(t),
    "relu_": torch.relu_,
    "zero_": lambda t: t.zero_(),
    "fill_": lambda t: t.fill_(3),
    "clamp_": lambda t: t.clamp_(min=10),
}


@pytest.mark.parametrize("view", [False, True], ids=["packed", "view"])
@pytest.mark.parametrize("op", sorted(IN_PLACE))
def test_in_place_ops_write_the_nested_tensor(op, view):
    """In-place ops on a nested tensor (through the CPU's nested kernels) write it, packed or
    torchtpu's view of a padded tensor, and return it; the fallback's copy back had no kernel."""
    def fn(d):
        if view:
            t = _from_mask(d)
        else:
            t = torch.nested.nested_tensor([torch.arange(8.0).view(2, 4) - 3, torch.ones(3, 4)])
            t = t.to(d)
        out = IN_PLACE[op](t)
        assert out is t
        return t.cpu().to_padded_tensor(-1.0)
    assert_same_as_cpu(fn)


VIEWS = {
    "unbind": lambda t: t.unbind()[1],
    "select": lambda t: t[2],
    "detach": lambda t: t.detach(),
    "alias": torch.ops.aten.alias,
    "transpose": lambda t: t.transpose(1, 2),
    "unsqueeze": lambda t: t.unsqueeze(2),
}


@pytest.mark.parametrize("view", [False, True], ids=["packed", "view"])
@pytest.mark.parametrize("op", sorted(VIEWS))
def test_views_of_a_nested_tensor_share_its_memory(op, view):
    """A view of a nested tensor (unbind's parts, select, transpose, ...) has its values, and
    sees a write to the nested tensor; a write through a part reaches the nested tensor, as on
    the CPU. Run on a CPU copy, they were copies."""
    def fn(d):
        if view:
            t = _from_mask(d)
        else:
            t = torch.nested.nested_tensor([torch.arange(8.0).view(2, 4), torch.ones(3, 4),
                                            torch.zeros(1, 4)]).to(d)
        v = VIEWS[op](t)
        values = [(v.contiguous().to_padded_tensor(-1.0) if v.is_nested else v).cpu().clone()]
        t.mul_(-2)
        values.append((v.contiguous().to_padded_tensor(-1.0) if v.is_nested else v).cpu().clone())
        if not v.is_nested:
            v.add_(100)
            values.append(t.cpu().to_padded_tensor(-1.0))
        return values
    assert_same_as_cpu(fn)


@pytest.mark.parametrize("index", [3, -4])
def test_select_of_a_nested_tensor_out_of_range(index):
    assert_same_as_cpu(lambda d: _from_mask(d)[index])
