"""F.scaled_dot_product_attention on "tpu" (csrc/aten/ops_attention.cc): one fused op where its
lowering covers the call, PyTorch's math composite elsewhere; both against the CPU, forward and
gradients, in every eager mode."""

import copy

import pytest
import torch
import torch.nn.functional as F
from conftest import OpLog

pytestmark = pytest.mark.usefixtures("fallback_error", "each_eager_mode")

FUSED = "aten._scaled_dot_product_fused_attention_overrideable.default"


def _inputs(shapes, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=dtype) for s in shapes]


def _run(q, k, v, requires_grad, **kwargs):
    """The attention of (q, k, v) and, with requires_grad, the gradients of a weighted sum."""
    q, k, v = (t.requires_grad_(requires_grad) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    if not requires_grad:
        return out, ()
    w = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape).to(out.device)
    return out, torch.autograd.grad((out * w).nansum(), (q, k, v))


def check(shapes=((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6)), dtype=torch.float32, fused=True,
          tol=2e-6, mask=None, requires_grad=True, prepare=lambda t: t, seed=0, **kwargs):
    """Runs the attention on the CPU and on tpu (inputs made by `prepare` from contiguous ones,
    the mask moved along) and compares outputs and gradients; says whether tpu ran the fused op."""
    cpu = _inputs(shapes, dtype, seed)
    tpu = [prepare(t.to("tpu")).detach() for t in cpu]
    expected, expected_grads = _run(*[prepare(t).detach() for t in cpu], requires_grad,
                                    attn_mask=mask, **kwargs)
    with OpLog() as log:
        got, grads = _run(*tpu, requires_grad, attn_mask=None if mask is None else mask.to("tpu"),
                          **kwargs)
    assert (FUSED in log.ops) == fused, log.ops
    torch.testing.assert_close(got.cpu(), expected, rtol=tol, atol=tol, equal_nan=True)
    for g, e in zip(grads, expected_grads):
        torch.testing.assert_close(g.cpu(), e, rtol=tol, atol=tol, equal_nan=True)
    return log.ops


@pytest.mark.parametrize("causal", [False, True])
def test_one_op_matches_cpu(causal):
    check(is_causal=causal)
    q, k, v = (t.to("tpu").requires_grad_() for t in _inputs(
        ((1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 4)), torch.float32, 0))
    with OpLog() as forward:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with OpLog() as backward:
        out.sum().backward()
    # the whole attention, where the composite makes about twenty ops, and its backward
    assert [op for op in forward.ops if op != "aten.detach.default"] == [FUSED], forward.ops
    assert FUSED.replace(".default", "_backward.default") in backward.ops, backward.ops


@pytest.mark.parametrize("lengths", [(7, 5), (5, 7), (1, 9), (9, 1)])
def test_causal_mask_is_top_left_for_any_lengths(lengths):
    q_len, k_len = lengths
    check(shapes=((1, 2, q_len, 4), (1, 2, k_len, 4), (1, 2, k_len, 4)), is_causal=True)


@pytest.mark.parametrize("mask", [
    torch.rand(5, 7, generator=torch.Generator().manual_seed(1)) > 0.4,       # bool, broadcast
    torch.randn(2, 1, 5, 7, generator=torch.Generator().manual_seed(2)),     # float, added
    torch.randn(1, 7, generator=torch.Generator().manual_seed(3)),           # float, one row
], ids=["bool", "float", "float_row"])
def test_masks(mask):
    check(mask=mask)


def test_a_row_masked_throughout_gives_zeros_and_no_nan():
    mask = torch.ones(5, 7, dtype=torch.bool)
    mask[2] = False
    mask[4, :] = False
    check(mask=mask)


def test_scale():
    check(scale=0.3)
    check(scale=-1.5)


def test_nan_and_infinity_spread_as_on_the_cpu():
    def poisoned(t):
        t = t.clone()
        if t.shape[-2] == 5:  # q: a NaN in one query, an infinity in another
            t[0, 1, 2, 3] = float("nan")
            t[1, 0, 4, 0] = float("inf")
        return t
    check(prepare=poisoned, requires_grad=False)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
@pytest.mark.parametrize("how", ["causal", "bool_mask"])
def test_a_nan_or_infinity_under_a_mask_spreads_as_on_the_cpu(value, how):
    # The composite adds its masks (0 or -inf): a NaN score, or +inf - inf, stays NaN where it is
    # masked, so every query row that has the key in its scores is NaN.
    mask = torch.ones(5, 7, dtype=torch.bool).tril() if how == "bool_mask" else None

    def poisoned(t):
        t = t.clone()
        if t.shape[-2] == 7 and t.shape[-1] == 8:  # k: key 6, which the causal mask hides
            t[0, 1, 6, 0] = value
        return t
    check(prepare=poisoned, mask=mask, is_causal=how == "causal")


@pytest.mark.parametrize("scale", [1e10, -3e9])
def test_scores_in_the_billions(scale):
    # q and k are scaled before their product, as the composite does: scaling the product put a
    # multiply before the softmax's subtraction, which XLA's CPU backend fused into a
    # multiply-add in one place and not in the row maximum, and rows came out 0 or NaN.
    q = torch.tensor([[[[-0.5, 1.0], [1.5, 0.25]]]])
    k = torch.tensor([[[[1.0, -1.0], [1.0, 0.5], [0.75, 0.5]]]])
    v = torch.tensor([[[[1.0], [2.0], [3.0]]]])
    expected = F.scaled_dot_product_attention(q, k, v, scale=scale)
    with OpLog() as log:
        got = F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"), scale=scale)
    assert FUSED in log.ops
    torch.testing.assert_close(got.cpu(), expected)


def test_non_contiguous_inputs():
    # (batch, seq, heads, dim) tensors viewed as (batch, heads, seq, dim), as attention layers do
    check(shapes=((2, 5, 3, 8), (2, 7, 3, 8), (2, 7, 3, 6)), prepare=lambda t: t.transpose(1, 2),
          is_causal=True)


@pytest.mark.parametrize("dtype, tol", [(torch.bfloat16, 2e-2), (torch.float64, 1e-12)])
def test_other_float_dtypes(dtype, tol):
    check(dtype=dtype, tol=tol, is_causal=True)


# The composite's cases: the same results as the CPU, without the fused op.

def test_grouped_query_heads_take_the_composite():
    check(shapes=((1, 4, 5, 8), (1, 2, 7, 8), (1, 2, 7, 8)), enable_gqa=True, fused=False)


def test_three_dimensional_inputs_take_the_composite():
    check(shapes=((3, 5, 8), (3, 7, 8), (3, 7, 8)), fused=False)


def test_broadcast_batch_takes_the_composite():
    check(shapes=((2, 3, 5, 8), (1, 3, 7, 8), (1, 3, 7, 8)), fused=False)


@pytest.mark.parametrize("shapes", [((1, 2, 0, 4), (1, 2, 3, 4), (1, 2, 3, 4)),
                                    ((1, 2, 3, 4), (1, 2, 0, 4), (1, 2, 0, 4))],
                         ids=["no_queries", "no_keys"])
def test_empty_inputs_take_the_composite(shapes):
    check(shapes=shapes, fused=False)


def test_a_mask_that_needs_a_gradient_takes_the_composite():
    mask = torch.randn(5, 7)
    cpu_mask, tpu_mask = mask.clone().requires_grad_(), mask.to("tpu").requires_grad_()
    q, k, v = _inputs(((2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 6)), torch.float32, 0)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=cpu_mask)
    with OpLog() as log:
        got = F.scaled_dot_product_attention(q.to("tpu"), k.to("tpu"), v.to("tpu"),
                                             attn_mask=tpu_mask)
    assert FUSED not in log.ops
    torch.testing.assert_close(got.cpu(), expected, rtol=2e-6, atol=2e-6)
    (expected_grad,) = torch.autograd.grad(expected.sum(), cpu_mask)
    (grad,) = torch.autograd.grad(got.sum(), tpu_mask)
    torch.testing.assert_close(grad.cpu(), expected_grad, rtol=2e-6, atol=2e-6)


def test_dropout_takes_the_composite():
    q, k, v = (t.to("tpu") for t in _inputs(((1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 4)),
                                            torch.float32, 0))
    with OpLog() as log:
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert FUSED not in log.ops and out.shape == (1, 2, 5, 4) and out.isfinite().all()


def test_errors_are_the_cpus():
    q, k, v = _inputs(((1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 4)), torch.float32, 0)
    for args in [(q, k.double(), v), (q, k[..., :3], v)]:
        with pytest.raises(RuntimeError) as on_cpu:
            F.scaled_dot_product_attention(*args)
        with pytest.raises(type(on_cpu.value)):
            F.scaled_dot_product_attention(*(t.to("tpu") for t in args))


def test_compiled_matches_eager():
    q, k, v = (t.to("tpu") for t in _inputs(((1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4)),
                                            torch.float32, 0))
    eager = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    compiled = torch.compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                            is_causal=True),
                             backend="tpu", fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v).cpu(), eager.cpu(), rtol=2e-6, atol=2e-6)


def test_functorch_transforms_take_the_composite():
    q, k, v = _inputs(((2, 1, 2, 5, 4), (2, 1, 2, 7, 4), (2, 1, 2, 7, 4)), torch.float32, 0)
    tq, tk, tv = (t.to("tpu") for t in (q, k, v))

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    with OpLog() as log:
        got = torch.vmap(attend)(tq, tk, tv)
    assert FUSED not in log.ops
    torch.testing.assert_close(got.cpu(), torch.vmap(attend)(q, k, v), rtol=2e-6, atol=2e-6)
    grad = torch.func.grad(lambda q: attend(q, tk[0], tv[0]).sum())(tq[0])
    expected = torch.func.grad(lambda q: attend(q, k[0], v[0]).sum())(q[0])
    torch.testing.assert_close(grad.cpu(), expected, rtol=2e-6, atol=2e-6)


def test_sdpa_kernel_chooses_as_it_does_on_cuda():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = (t.to("tpu") for t in _inputs(((1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 4)),
                                            torch.float32, 0))
    for backends in ([SDPBackend.FLASH_ATTENTION], [SDPBackend.EFFICIENT_ATTENTION],
                     [SDPBackend.OVERRIDEABLE]):  # the fused backends: this op
        with sdpa_kernel(backends), OpLog() as log:
            F.scaled_dot_product_attention(q, k, v)
        assert FUSED in log.ops, (backends, log.ops)
    with sdpa_kernel([SDPBackend.MATH]), OpLog() as log:
        F.scaled_dot_product_attention(q, k, v)
    assert FUSED not in log.ops and "aten._safe_softmax.default" in log.ops
    # nothing enabled covers the call (the fused op takes no dropout): PyTorch's error
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]), pytest.raises(RuntimeError,
                                                                  match="No viable backend"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)


def test_double_backward_through_the_math_backend():
    # The fused op's backward has no derivative (nor do CUDA's fused kernels'); the composite,
    # chosen with sdpa_kernel, gives the second derivative as on the CPU.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def second(device):
        q, k, v = (t.to(device) for t in _inputs(((1, 1, 3, 2), (1, 1, 3, 2), (1, 1, 3, 2)),
                                                 torch.float32, 0))
        q.requires_grad_()
        with sdpa_kernel([SDPBackend.MATH]):
            out = F.scaled_dot_product_attention(q, k, v)
            g, = torch.autograd.grad(out.pow(2).sum(), q, create_graph=True)
            g.pow(2).sum().backward()
        return q.grad.cpu()
    torch.testing.assert_close(second("tpu"), second("cpu"), rtol=2e-6, atol=2e-6)


def test_forward_mode_gradients_take_the_composite():
    import torch.autograd.forward_ad as fwAD
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = _inputs(((1, 1, 3, 2), (1, 1, 3, 2), (1, 1, 3, 2)), torch.float32, 0)

    def tangent(device):
        with fwAD.dual_level():
            dual = fwAD.make_dual(q.to(device), torch.ones_like(q).to(device))
            out = F.scaled_dot_product_attention(dual, k.to(device), v.to(device))
            return fwAD.unpack_dual(out).tangent.cpu()
    with sdpa_kernel([SDPBackend.MATH]):  # the CPU's flash kernel has no forward derivative
        expected = tangent("cpu")
    with OpLog() as log:
        got = tangent("tpu")
    assert FUSED not in log.ops
    torch.testing.assert_close(got, expected, rtol=2e-6, atol=2e-6)


# nn.MultiheadAttention's and nn.TransformerEncoderLayer's inference fast paths
# (`_native_multi_head_attention`, `_transformer_encoder_layer_fwd`, csrc/aten/ops_transformer.cc),
# which had run on the CPU fallback: every mask kind the modules pass (a key padding mask, an
# attention mask of 2 or 3 dimensions, both), a key padding mask hiding every key of a row (NaN
# there, as on the CPU), and the attention weights averaged or per head.
B, L, E, H = 2, 5, 16, 4
PADDING = [[False, False, False, True, True], [False, True, False, False, False]]
MHA_MASKS = {
    "none": lambda: {},
    "padding": lambda: {"key_padding_mask": torch.tensor(PADDING)},
    "padding_whole_row": lambda: {"key_padding_mask": torch.tensor([[True] * L, PADDING[1]])},
    "attn_mask": lambda: {"attn_mask": torch.ones(L, L, dtype=torch.bool).triu(1)},
    "attn_mask_3d": lambda: {
        "attn_mask": torch.rand(B * H, L, L, generator=torch.Generator().manual_seed(1)) > 0.7},
    "both": lambda: {"attn_mask": torch.ones(L, L, dtype=torch.bool).triu(1),
                     "key_padding_mask": torch.tensor(PADDING)},
}


def _fast_path_outputs(module, x, kwargs, device):
    module = copy.deepcopy(module).to(device)
    kwargs = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    with torch.no_grad():
        out = module(*([x.to(device)] * (3 if isinstance(module, torch.nn.MultiheadAttention)
                                         else 1)), **kwargs)
    return [t if t is None else t.cpu() for t in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("need_weights,average", [(False, True), (True, True), (True, False)])
@pytest.mark.parametrize("mask", sorted(MHA_MASKS))
def test_multi_head_attention_fast_path_matches_cpu(mask, need_weights, average):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    x = torch.randn(B, L, E)
    kwargs = dict(MHA_MASKS[mask](), need_weights=need_weights, average_attn_weights=average)
    expected = _fast_path_outputs(mha, x, kwargs, "cpu")
    got = _fast_path_outputs(mha, x, kwargs, "tpu")
    for e, g in zip(expected, got):
        assert (e is None) == (g is None)
        if e is not None:
            torch.testing.assert_close(g, e, equal_nan=True, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("mask", ["none", "src_mask", "causal"])
def test_transformer_encoder_layer_fast_path_matches_cpu(activation, norm_first, mask):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(E, H, 32, activation=activation,
                                             norm_first=norm_first, batch_first=True).eval()
    x = torch.randn(B, L, E)
    kwargs = {"none": {}, "src_mask": {"src_mask": torch.ones(L, L, dtype=torch.bool).triu(1)},
              "causal": {"src_mask": torch.nn.Transformer.generate_square_subsequent_mask(L),
                         "is_causal": True}}[mask]
    expected = _fast_path_outputs(layer, x, kwargs, "cpu")
    got = _fast_path_outputs(layer, x, kwargs, "tpu")
    torch.testing.assert_close(got[0], expected[0], rtol=1e-5, atol=1e-5)
