"""nn building blocks on "tpu", forward and backward, against CPU, with no CPU fallback."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_flatten

pytestmark = pytest.mark.usefixtures("fallback_error")


def check(fn, *inputs, rtol=1e-4, atol=1e-4):
    cpu = [i.clone().requires_grad_(i.is_floating_point()) for i in inputs]
    dev = [i.detach().to("tpu").requires_grad_(i.is_floating_point()) for i in inputs]
    expected, got = fn(*cpu), fn(*dev)
    torch.testing.assert_close(got.cpu(), expected, rtol=rtol, atol=atol)
    (expected * expected).sum().backward()
    (got * got).sum().backward()
    for c, d in zip(cpu, dev):
        if c.requires_grad:
            torch.testing.assert_close(d.grad.cpu(), c.grad, rtol=rtol, atol=atol)


X4 = torch.randn(2, 4, 9, 8, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1, "dilation": 2},
                                    {"padding": 1, "groups": 2}])
def test_conv2d(kwargs):
    groups = kwargs.get("groups", 1)
    w = torch.randn(6, 4 // groups, 3, 3)
    check(lambda x, w, b: F.conv2d(x, w, b, **kwargs), X4, w, torch.randn(6))


def test_conv1d():
    check(lambda x, w: F.conv1d(x, w, stride=2, padding=2), torch.randn(3, 4, 17),
          torch.randn(5, 4, 4))


def test_conv_transpose2d_forward():
    w = torch.randn(4, 3, 3, 3)
    expected = F.conv_transpose2d(X4, w, stride=2, padding=1, output_padding=1)
    got = F.conv_transpose2d(X4.to("tpu"), w.to("tpu"), stride=2, padding=1, output_padding=1)
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fn", [
    lambda x: F.max_pool2d(x, 3, 2, 1),
    lambda x: F.max_pool2d(x, 2, 2, 0, dilation=2, ceil_mode=True),
    lambda x: F.avg_pool2d(x, 3, 2, 1),
    lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
    lambda x: F.adaptive_avg_pool2d(x, 1),
], ids=["max", "max_dilated_ceil", "avg", "avg_no_pad_count", "avg_ceil", "adaptive_avg"])
def test_pooling(fn):
    check(fn, X4)


@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_updates_running_stats(train):
    torch.manual_seed(0)
    ref, dev = torch.nn.BatchNorm2d(4), torch.nn.BatchNorm2d(4).to("tpu")
    ref.train(train)
    dev.train(train)
    for _ in range(2):
        xc = torch.randn(3, 4, 5, 5, requires_grad=True)
        xt = xc.detach().to("tpu").requires_grad_()
        yc, yt = ref(xc), dev(xt)
        torch.testing.assert_close(yt.cpu(), yc, rtol=1e-4, atol=1e-4)
        (yc * yc).sum().backward()
        (yt * yt).sum().backward()
        torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dev.weight.grad.cpu(), ref.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(dev.running_mean.cpu(), ref.running_mean)
    torch.testing.assert_close(dev.running_var.cpu(), ref.running_var)


@pytest.mark.parametrize("fn", [
    lambda x: F.group_norm(x, 2),
    lambda x: F.layer_norm(x, (8,)),
    lambda x: F.rms_norm(x, (8,)),
    lambda x: F.softmax(x, -1),
    lambda x: F.log_softmax(x, 1),
    lambda x: F.gelu(x),
    lambda x: F.gelu(x, approximate="tanh"),
    lambda x: F.silu(x),
    lambda x: F.relu(x),
    lambda x: F.leaky_relu(x, 0.1),
    lambda x: torch.sigmoid(x) * torch.tanh(x),
], ids=["group_norm", "layer_norm", "rms_norm", "softmax", "log_softmax", "gelu", "gelu_tanh",
        "silu", "relu", "leaky_relu", "sigmoid_tanh"])
def test_activations_and_norms(fn):
    check(fn, X4)


@pytest.mark.parametrize("causal", [True, False])
def test_scaled_dot_product_attention(causal):
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v)


def test_losses():
    logits, target = torch.randn(6, 5), torch.tensor([0, 4, 2, 1, 3, 2])
    check(lambda x, t: F.cross_entropy(x, t), logits, target)
    check(lambda x, t: F.cross_entropy(x, t, reduction="sum", ignore_index=2), logits, target)
    check(lambda x, t: F.nll_loss(F.log_softmax(x, 1), t,
                                  weight=torch.arange(1.0, 6.0, device=x.device)), logits, target)
    check(lambda x, y: F.mse_loss(x, y), torch.randn(4, 3), torch.randn(4, 3))


def test_embedding():
    idx = torch.tensor([[1, 3, 3], [0, 2, 1]])
    check(lambda w, i: F.embedding(i, w), torch.randn(5, 4), idx)
    check(lambda w, i: F.embedding(i, w, padding_idx=3), torch.randn(5, 4), idx)


def test_linear_and_matmul_family():
    a, b, bias = torch.randn(3, 4), torch.randn(4, 5), torch.randn(5)
    check(lambda a, b: a @ b, a, b)
    check(lambda a, w, b: F.linear(a, w, b), a, torch.randn(5, 4), bias)
    check(lambda x, y: torch.bmm(x, y), torch.randn(2, 3, 4), torch.randn(2, 4, 2))
    check(lambda x, y, z: torch.baddbmm(z, x, y, beta=0.5, alpha=2), torch.randn(2, 3, 4),
          torch.randn(2, 4, 2), torch.randn(2, 3, 2))
    check(lambda x, y: torch.einsum("bij,bjk->bik", x, y), torch.randn(2, 3, 4),
          torch.randn(2, 4, 2))


def tied_model():
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    return torch.nn.ModuleDict({"emb": emb, "head": head})


def test_module_to_keeps_tied_parameters_tied():
    m = tied_model().to("tpu")
    assert m.emb.weight is m.head.weight
    assert len(list(m.parameters())) == 1
    m = m.cpu().to("tpu")  # round trips keep the tie too
    assert m.emb.weight is m.head.weight and m.emb.weight.device.type == "tpu"


def test_tied_model_trains_like_cpu():
    models = {"cpu": tied_model(), "tpu": tied_model().to("tpu")}
    tokens = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]])
    for device, m in models.items():
        opt = torch.optim.SGD(m.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            x = tokens.to(device)
            F.cross_entropy(m.head(m.emb(x)).flatten(0, 1), x.flatten()).backward()
            opt.step()
    torch.testing.assert_close(models["tpu"].emb.weight.detach().cpu(),
                               models["cpu"].emb.weight.detach(), rtol=1e-4, atol=1e-5)


EDGES = torch.tensor([-4.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 4.0, 25.0])


@pytest.mark.parametrize("fn", [
    F.hardtanh, F.relu6, F.hardswish, F.hardsigmoid, F.hardshrink, F.softshrink, F.elu, F.selu,
    F.celu, F.softplus, F.mish, F.logsigmoid, lambda x: F.threshold(x, 0.5, -2.0),
    lambda x: torch.logit(x, 0.25), lambda x: F.softplus(x, beta=2, threshold=3),
], ids=["hardtanh", "relu6", "hardswish", "hardsigmoid", "hardshrink", "softshrink", "elu", "selu",
        "celu", "softplus", "mish", "logsigmoid", "threshold", "logit_eps", "softplus_beta"])
def test_activation_edges_nan_and_gradients(fn):
    """At the kinks: the CPU's values and gradients; a NaN input gives NaN. (The CPU's gradient
    at NaN depends on which of its loops ran, so it is not compared.)"""
    cpu, dev = EDGES.clone().requires_grad_(), EDGES.to("tpu").requires_grad_()
    expected, got = fn(cpu), fn(dev)
    torch.testing.assert_close(got.cpu(), expected)
    expected.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(dev.grad.cpu(), cpu.grad)
    nan = torch.tensor([float("nan"), 0.5])
    torch.testing.assert_close(fn(nan.to("tpu")).cpu(), fn(nan), equal_nan=True)


@pytest.mark.parametrize("fn", [
    lambda x: F.elu_(x, 0.5), lambda x: F.hardtanh_(x, -0.5, 0.25),
    lambda x: F.threshold_(x, 0.0, 7.0),
    lambda x: F.hardswish(x, inplace=True), lambda x: F.mish(x, inplace=True),
], ids=["elu_", "hardtanh_", "threshold_", "hardswish_", "mish_"])
def test_inplace_activation_on_a_non_contiguous_view(fn):
    base = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    dev = base.to("tpu")
    fn(base.t()[1:4])
    fn(dev.t()[1:4])
    torch.testing.assert_close(dev.cpu(), base)


def _raises_at_sync(fn, error, message):
    with pytest.raises(error, match=message):
        fn().cpu()
        torch.tpu.synchronize()


def test_loss_target_and_input_range_errors_are_cpus():
    """Checked on the device (no wait at the op), raised as the CPU raises them."""
    x = torch.rand(2, 3).to("tpu")
    _raises_at_sync(lambda: F.multi_margin_loss(x, torch.tensor([0, 3], device="tpu")),
                    RuntimeError, "target out of range")
    _raises_at_sync(lambda: F.multilabel_margin_loss(x, torch.tensor([[0, -1, 5], [1, 2, -1]],
                                                                     device="tpu")),
                    RuntimeError, "argument #2 'target' is out of range")
    _raises_at_sync(lambda: F.binary_cross_entropy(x * 2, x), RuntimeError,
                    "all elements of input should be between 0 and 1")
    _raises_at_sync(lambda: F.binary_cross_entropy(x, x - 1), RuntimeError,
                    "all elements of target should be between 0 and 1")
    scores = torch.randn(2, 3, 2, 2).to("tpu")
    _raises_at_sync(lambda: F.nll_loss(scores, torch.full((2, 2, 2), 3, device="tpu")),
                    IndexError, "Target 3 is out of bounds")


def test_spatial_nll_loss_weights_and_ignore_index():
    scores, target = torch.randn(2, 3, 4, 5), torch.randint(0, 3, (2, 4, 5))
    weight = torch.tensor([0.5, 2.0, 1.0])
    for reduction in ["none", "mean", "sum"]:
        check(lambda x, t, r=reduction: F.nll_loss(x, t, weight=weight.to(x.device),
                                                    ignore_index=1, reduction=r), scores, target)


def _mask_cases():
    """Backward ops that make only the gradients their output mask asks for, as (op, arguments
    before the mask, mask length), the arguments made on the CPU by the forward op."""
    g = torch.Generator().manual_seed(0)
    r = lambda *shape: torch.randn(*shape, generator=g)  # noqa: E731
    x, w, b, go = r(4, 8), r(8), r(8), r(4, 8)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [8], w, b, 1e-5)
    yield "layer_norm", torch.ops.aten.native_layer_norm_backward, \
        [go, x, [8], mean, rstd, w, b], 3
    x, w, b, go = r(2, 4, 3), r(4), r(4), r(2, 4, 3)
    _, mean, rstd = torch.ops.aten.native_group_norm(x, w, b, 2, 4, 3, 2, 1e-5)
    yield "group_norm", torch.ops.aten.native_group_norm_backward, \
        [go, x, mean, rstd, w, 2, 4, 3, 2], 3
    x, w, b, go = r(4, 3), r(3), r(3), r(4, 3)
    rm, rv = torch.zeros(3), torch.ones(3)
    _, save_mean, save_invstd = torch.ops.aten.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    yield "batch_norm", torch.ops.aten.native_batch_norm_backward, \
        [go, x, w, rm, rv, save_mean, save_invstd, True, 1e-5], 3
    x, grid, go = r(1, 2, 4, 4), r(1, 3, 3, 2) * 0.9, r(1, 2, 3, 3)
    yield "grid_sampler_2d", torch.ops.aten.grid_sampler_2d_backward, \
        [go, x, grid, 0, 0, False], 2
    x, w, go = r(1, 2, 5), r(3, 2, 2), r(1, 3, 4)
    yield "convolution", torch.ops.aten.convolution_backward, \
        [go, x, w, [3], [1], [0], [1], False, [0], 1], 3


@pytest.mark.parametrize("case", list(_mask_cases()), ids=lambda c: c[0])
def test_backward_ops_make_only_the_gradients_their_mask_asks_for(case):
    """Each mask of the same op on the same shapes, in turn: the gradients left out are None, as
    on the CPU, and the others right (a mask must not reuse another mask's outputs)."""
    import itertools
    _, op, args, n = case
    on_tpu = [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]
    for mask in itertools.product([True, False], repeat=n):
        mask = list(mask)
        expected, got = op(*args, mask), op(*on_tpu, mask)
        for e, t in zip(expected, got, strict=True):
            assert (t is None) == (e is None), mask
            if e is not None:
                torch.testing.assert_close(t.cpu(), e, rtol=1e-4, atol=1e-4)


HALF_NORMS = {
    "layer_norm": ((4, 6), lambda x, w, b: F.layer_norm(x, (6,), w, b)),
    "group_norm": ((3, 6, 5), lambda x, w, b: F.group_norm(x, 2, w, b)),
    "instance_norm": ((3, 6, 5), lambda x, w, b: F.instance_norm(x, weight=w, bias=b)),
    "batch_norm": ((3, 6, 5), lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)),
    "rms_norm": ((4, 6), lambda x, w, b: F.rms_norm(x, (6,), w)),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", list(HALF_NORMS))
def test_norms_train_in_half_types(name, dtype, each_eager_mode):
    """A norm of a bfloat16 or float16 model (model.to(dtype)) and its backward, which takes the
    float32 statistics the forward saved (as on CUDA; the CPU saves the input's type, and its
    verdict had refused them): as close to float64 as the CPU's."""
    shape, fn = HALF_NORMS[name]
    torch.manual_seed(0)
    x, w, b, grad = torch.randn(*shape), torch.randn(6), torch.randn(6), torch.randn(*shape)

    def run(device, dt):
        leaves = [t.to(device, dt).requires_grad_() for t in (x, w, b)]
        out = fn(*leaves)
        out.backward(grad.to(device, dt))
        return [t.detach().cpu().double() for t in [out] + [t.grad for t in leaves]
                if t is not None]

    reference, cpu, tpu = run("cpu", torch.float64), run("cpu", dtype), run("tpu", dtype)
    for r, c, t in zip(reference, cpu, tpu, strict=True):
        assert (t - r).abs().max() <= 2 * (c - r).abs().max() + 1e-3


@pytest.mark.parametrize("shape", [(0, 6, 5), (3, 6, 0), (3, 6), (2, 6, 3, 4)])
def test_native_group_norm_matches_the_cpu_on_empty_inputs_and_groups(shape, each_eager_mode):
    """Its own lowering (statistics and affine in float32, rounded once): an empty group's mean
    is 0 and its rstd NaN, as on the CPU."""
    torch.manual_seed(0)
    x, w, b = torch.randn(*shape), torch.randn(6), torch.randn(6)
    hw = x[0, 0].numel() if shape[0] else 0

    def run(device):
        return [t.cpu() for t in torch.ops.aten.native_group_norm(
            x.to(device), w.to(device), b.to(device), shape[0], 6, hw, 2, 1e-5)]
    for got, expected in zip(run("tpu"), run("cpu"), strict=True):
        torch.testing.assert_close(got, expected, equal_nan=True)


# The recurrent layers call a fused cell per step on tpu (`_thnn_fused_lstm_cell`,
# `_thnn_fused_gru_cell`, csrc/aten/ops_rnn.cc): every eager mode, no_grad, inference mode and
# torch.compile, with packed sequences, two layers and both directions.
RNNS = {
    "lstm": lambda: torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True),
    "lstm_proj": lambda: torch.nn.LSTM(4, 6, proj_size=3),
    "gru": lambda: torch.nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True),
    "lstm_cell": lambda: torch.nn.LSTMCell(4, 5),
    "gru_cell": lambda: torch.nn.GRUCell(4, 5, bias=False),
}


def _rnn_run(name, module, device, how):
    torch.manual_seed(0)
    cell = name.endswith("cell")
    x = torch.randn(3, 4) if cell else torch.randn(3, 6, 4)
    x = x.to(device).requires_grad_()
    inputs = x
    if name == "lstm" and how == "packed":
        inputs = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor([6, 4, 2]),
                                                         batch_first=True)
    forward = module
    if how == "compiled":
        forward = torch.compile(module, backend="tpu" if device == "tpu" else "eager")
    if how in ("no_grad", "inference"):
        with torch.no_grad() if how == "no_grad" else torch.inference_mode():
            out = forward(inputs)
        return [t.cpu() for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
    out = forward(inputs)
    flat = [t for t in tree_flatten(out)[0]
            if isinstance(t, torch.Tensor) and t.dtype.is_floating_point]
    loss = sum((t * torch.arange(t.numel(), device=device).reshape(t.shape).sin()).sum()
               for t in flat)
    grads = torch.autograd.grad(loss, [x] + list(module.parameters()))
    return [t.detach().cpu() for t in flat] + [g.cpu() for g in grads]


@pytest.mark.parametrize("name,how", [(name, how) for name in sorted(RNNS)
                                      for how in ("autograd", "no_grad", "inference", "compiled")]
                         + [("lstm", "packed")])
def test_recurrent_layers_match_cpu(name, how, each_eager_mode):
    torch.manual_seed(0)
    module = RNNS[name]()
    expected = _rnn_run(name, copy.deepcopy(module), "cpu", how)
    got = _rnn_run(name, copy.deepcopy(module).to("tpu"), "tpu", how)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


# Weight norm (`torch.nn.utils.parametrizations.weight_norm`) runs `_weight_norm_interface` and its
# backward, which had fallen back to the CPU: each norm dimension, bfloat16 (norms in float32),
# and a zero slice (its norm 0: NaN, as on the CPU).
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape,dim", [((3, 4), 0), ((3, 4), 1), ((2, 3, 5), 0), ((2, 3, 5), 2)])
def test_weight_norm_interface_matches_cpu(shape, dim, dtype, each_eager_mode):
    torch.manual_seed(0)
    v = torch.randn(shape).to(dtype)
    v[0] = 0
    g = torch.randn([s if i == dim else 1 for i, s in enumerate(shape)]).to(dtype)
    results = []
    for device in ("cpu", "tpu"):
        vv, gg = v.to(device).requires_grad_(), g.to(device).requires_grad_()
        w, norms = torch.ops.aten._weight_norm_interface(vv, gg, dim)
        grad_w = torch.arange(w.numel(), device=device).reshape(w.shape).sin().to(dtype)
        results.append([t.detach().cpu() for t in
                        (w, norms, *torch.autograd.grad(w, [vv, gg], grad_w))])
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    for expected, got in zip(*results):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        torch.testing.assert_close(got, expected, rtol=tol, atol=tol, equal_nan=True)


# An empty weight: the CPU's kernel (and `torch._weight_norm`) dies of SIGFPE, dividing by the
# empty dimension, where its slices are empty, so the values are the formula's.
@pytest.mark.parametrize("shape,dim", [((0, 3), 0), ((3, 0), 1), ((3, 0), 0), ((0, 2, 3), 2)])
def test_weight_norm_interface_of_an_empty_weight(shape, dim, each_eager_mode):
    v = torch.randn(shape)
    g = torch.randn([s if i == dim else 1 for i, s in enumerate(shape)])
    others = [i for i in range(len(shape)) if i != dim]
    expected_norms = v.norm(dim=others, keepdim=True)
    vv, gg = v.to("tpu").requires_grad_(), g.to("tpu").requires_grad_()
    w, norms = torch.ops.aten._weight_norm_interface(vv, gg, dim)
    torch.testing.assert_close(norms.cpu(), expected_norms)
    torch.testing.assert_close(w.detach().cpu(), v * g / expected_norms)
    grad_v, grad_g = torch.autograd.grad(w, [vv, gg], torch.ones_like(w))
    assert grad_v.shape == v.shape and grad_g.shape == g.shape
    # The CPU's where it runs: 0 / 0 (its sum over no elements, over the norm).
    torch.testing.assert_close(grad_g.cpu(), v.sum(others, keepdim=True) / expected_norms,
                               equal_nan=True)
    torch.testing.assert_close(torch._weight_norm(vv, gg, dim).detach().cpu(), w.detach().cpu())


# pdist of no rows: the CPU's backward dies (SIGSEGV); the gradient is empty.
def test_pdist_of_no_rows(each_eager_mode):
    x = torch.ones(0, 3, device="tpu", requires_grad=True)
    y = torch.nn.functional.pdist(x)
    (grad,) = torch.autograd.grad(y.sum(), x)
    assert y.shape == (0,) and grad.shape == (0, 3)
    assert (y.sum() + grad.sum()).item() == 0


# The margin losses of one unbatched sample, unreduced: PyTorch's meta functions give the shape
# [1], its CPU kernels []; these had run on the CPU fallback.
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("loss,target", [
    (F.multi_margin_loss, torch.tensor(2)),
    (F.multilabel_margin_loss, torch.tensor([1, 2, -1, 0])),
], ids=["multi_margin", "multilabel_margin"])
def test_margin_loss_of_one_sample(loss, target, reduction, each_eager_mode):
    x = torch.randn(4)
    results = []
    for device in ("cpu", "tpu"):
        xx = x.to(device).requires_grad_()
        out = loss(xx, target.to(device), reduction=reduction)
        (grad,) = torch.autograd.grad(out.sum(), xx)
        results.append((out.detach().cpu(), grad.cpu()))
    for expected, got in zip(*results):
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected)


def test_weight_norm_parametrization_trains_like_cpu():
    results = []
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(2, 3, 3)).to(device)
        x = torch.randn(2, 2, 7).to(device)
        opt = torch.optim.SGD(conv.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            conv(x).square().mean().backward()
            opt.step()
        results.append([p.detach().cpu() for p in conv.parameters()])
    for expected, got in zip(*results):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


# Batch norm in eval mode saves empty statistics, float32 for a half-type input as on CUDA (the
# CPU's are in the parameters' type); the backward's check against the CPU had handed those to the
# CPU's kernel, which refused them ("expected scalar type BFloat16 but found Float").
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("module,shape", [
    (lambda: torch.nn.BatchNorm1d(3), (4, 3)),
    (lambda: torch.nn.BatchNorm2d(3), (2, 3, 4, 4)),
    (lambda: torch.nn.InstanceNorm1d(3, affine=True, track_running_stats=True), (2, 3, 5)),
], ids=["batch_norm1d", "batch_norm2d", "instance_norm1d"])
def test_eval_norm_backward_in_half_types_matches_cpu(module, shape, dtype, each_eager_mode):
    torch.manual_seed(0)
    norm = module().eval().to(dtype)
    x = torch.randn(shape).to(dtype)
    results = []
    for device in ("cpu", "tpu"):
        moved = copy.deepcopy(norm).to(device)
        xd = x.to(device).requires_grad_()
        y = moved(xd)
        weights = torch.arange(y.numel(), device=device).reshape(y.shape).sin()
        grads = torch.autograd.grad((y.float() * weights).sum(), [xd, *moved.parameters()])
        results.append([y.detach().cpu(), *(g.cpu() for g in grads)])
    for expected, got in zip(*results):
        torch.testing.assert_close(got, expected, rtol=1e-2, atol=1e-2)


# Convolutions and batch norm keep the channels-last layout as PyTorch's kernels do (the
# results channels-last where the input or the weight is), forward and backward: they had
# returned contiguous tensors, so code that views a channels-last activation as such (a permute
# to NHWC and a view) failed on tpu.
LAYOUT_NETS = {
    "conv2d": (lambda: torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1),
                                           torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                           torch.nn.Conv2d(8, 4, 3, stride=2)),
               (2, 3, 8, 8), torch.channels_last),
    "conv_transpose2d": (lambda: torch.nn.Sequential(torch.nn.ConvTranspose2d(3, 4, 3, stride=2),
                                                     torch.nn.BatchNorm2d(4)),
                         (2, 3, 5, 5), torch.channels_last),
    "conv3d": (lambda: torch.nn.Sequential(torch.nn.Conv3d(2, 4, 3, padding=1),
                                           torch.nn.BatchNorm3d(4),
                                           torch.nn.ConvTranspose3d(4, 2, 2, stride=2)),
               (2, 2, 4, 4, 4), torch.channels_last_3d),
}


@pytest.mark.parametrize("which", ["input", "weight", "both", "neither"])
@pytest.mark.parametrize("net", sorted(LAYOUT_NETS))
def test_channels_last_layout_follows_pytorch(net, which):
    make, shape, layout = LAYOUT_NETS[net]
    torch.manual_seed(0)
    model, x = make(), torch.randn(shape)
    results = []
    for device in ("cpu", "tpu"):
        moved = copy.deepcopy(model).to(device)
        if which in ("weight", "both"):
            moved = moved.to(memory_format=layout)
        xd = x.to(device)
        if which in ("input", "both"):
            xd = xd.to(memory_format=layout)
        xd.requires_grad_()
        outs, h = [], xd
        for layer in moved:
            h = layer(h)
            outs.append(h)
        grads = torch.autograd.grad((h * h).sum(), [xd, *moved.parameters()])
        results.append(([o.stride() for o in outs] + [grads[0].stride()],
                        [t.detach().cpu() for t in outs + list(grads)]))
    assert results[1][0] == results[0][0]
    for expected, got in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(got, expected, rtol=1e-3, atol=2e-3)
