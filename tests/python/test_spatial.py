"""Spatial ops lowered to the device (adaptive and fractional pooling, upsampling,
reflection/replication padding, grid_sample, embedding_bag, im2col/col2im, max_unpool): what the
OpInfo suite does not check. Each case runs on the CPU and on "tpu" with the same inputs and must
match, forward and backward, without any CPU fallback: NaNs stay local, channels_last and
non-contiguous inputs, empty batches, scales that differ from the size ratio, every grid_sample
mode, and PyTorch's errors (reflection pad too large, out-of-range indices through the device-side
checks)."""

import re

import pytest
import torch
import torch.nn.functional as F

import torchtpu

MODES = ["strict", "debug", "defer_and_fuse"]


def _fallbacks():
    return dict(torchtpu.metrics()["cpu_fallbacks"])


def _check(fn, *inputs, grad=True, atol=1e-5, rtol=1.3e-6):
    """fn on CPU copies and on tpu copies of `inputs` gives the same values (and gradients of
    the floating inputs), with no op falling back to the CPU."""
    cpu = [x.detach().clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    dev = [x.detach().to("tpu").requires_grad_(grad and x.is_floating_point()) for x in inputs]
    before = _fallbacks()
    expected, got = fn(*cpu), fn(*dev)
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True, atol=atol, rtol=rtol)
    if grad:
        weight = torch.linspace(-1, 1, expected.numel()).reshape(expected.shape)
        (expected * weight).sum().backward()
        (got * weight.to("tpu")).sum().backward()
        for c, d in zip(cpu, dev, strict=True):
            if c.requires_grad:
                torch.testing.assert_close(d.grad.cpu(), c.grad, atol=atol, rtol=rtol)
    after = _fallbacks()
    fell_back = sorted(op for op, n in after.items() if n > before.get(op, 0))
    assert not fell_back, f"ran on the CPU: {fell_back}"


@pytest.mark.parametrize(
    "mode, kind",
    [("strict", k) for k in ["bilinear", "bicubic", "nearest", "nearest-exact"]]
    + [(m, "bilinear") for m in ["debug", "defer_and_fuse"]],
)
def test_interpolate_channels_last_and_fractional_scales(mode, kind):
    x = torch.randn(2, 3, 5, 7).to(memory_format=torch.channels_last)
    corners = {} if kind.startswith("nearest") else {"align_corners": False}
    with torchtpu.eager_mode(mode):
        _check(lambda t: F.interpolate(t, scale_factor=1.7, mode=kind,
                                       recompute_scale_factor=False, **corners), x)
        _check(lambda t: F.interpolate(t, size=(3, 11), mode=kind, **corners), x)
        if corners:
            _check(lambda t: F.interpolate(t, size=(9, 4), mode=kind, align_corners=True), x)


def test_interpolate_trilinear_and_linear_non_contiguous():
    x = torch.randn(2, 4, 6, 5, 3).transpose(2, 4)
    _check(lambda t: F.interpolate(t, scale_factor=(0.6, 2.0, 1.5), mode="trilinear"), x)
    y = torch.randn(3, 8, 2).transpose(1, 2)
    _check(lambda t: F.interpolate(t, size=13, mode="linear", align_corners=True), y)


def test_a_nan_reaches_only_the_outputs_that_read_it():
    x = torch.randn(1, 1, 6, 6)
    x[0, 0, 2, 3] = float("nan")
    for kind in ["bilinear", "bicubic"]:
        _check(lambda t, kind=kind: F.interpolate(t, size=(9, 9), mode=kind), x, grad=False)
    _check(lambda t: F.adaptive_avg_pool2d(t, (4, 3)), x, grad=False)
    _check(lambda t: F.adaptive_max_pool2d(t, (4, 3), return_indices=True)[1].float(), x,
           grad=False)


@pytest.mark.parametrize("mode", MODES)
def test_adaptive_pooling_windows_overlap_and_ties_pick_the_first(mode):
    x = torch.randn(2, 3, 7, 10).to(memory_format=torch.channels_last)
    ties = torch.tensor([[1.0, 3.0, 3.0, 0.0, 3.0], [3.0, 2.0, 3.0, 3.0, 1.0]]).reshape(1, 1, 2, 5)
    with torchtpu.eager_mode(mode):
        _check(lambda t: F.adaptive_avg_pool2d(t, (3, 4)), x)
        _check(lambda t: F.adaptive_max_pool2d(t, (3, 4)), x)
        _check(lambda t: F.adaptive_max_pool2d(t, (1, 2), return_indices=True)[1].float(), ties,
               grad=False)
        _check(lambda t: F.adaptive_avg_pool3d(t, (2, 3, 2)), torch.randn(1, 2, 3, 5, 4))
        _check(lambda t: F.adaptive_max_pool3d(t, (2, 3, 2)), torch.randn(1, 2, 3, 5, 4))


def test_empty_batches():
    x = torch.randn(0, 3, 6, 6)
    _check(lambda t: F.adaptive_avg_pool2d(t, 2), x)
    _check(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"), x)
    _check(lambda t: F.pad(t, (1, 2, 2, 1), mode="reflect"), x)
    _check(lambda t, g: F.grid_sample(t, g, align_corners=False), x, torch.zeros(0, 2, 2, 2))


@pytest.mark.parametrize("mode", MODES)
def test_reflection_and_replication_padding(mode):
    x = torch.randn(2, 3, 5, 6).transpose(2, 3)
    with torchtpu.eager_mode(mode):
        for kind in ["reflect", "replicate"]:
            _check(lambda t, kind=kind: F.pad(t, (4, 1, 2, 3), mode=kind), x)
            _check(lambda t, kind=kind: F.pad(t, (2, 0), mode=kind), x[:, :, 0])
            _check(lambda t, kind=kind: F.pad(t, (1, 2, 0, 1, 2, 1), mode=kind), x[None])
        _check(lambda t: F.pad(t, (-1, 2, 3, -2), mode="replicate"), x)


def test_a_reflection_pad_larger_than_the_input_raises_pytorchs_error():
    x = torch.randn(1, 2, 3)
    with pytest.raises(RuntimeError, match="Padding size should be less than") as cpu:
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(RuntimeError) as dev:
        F.pad(x.to("tpu"), (3, 0), mode="reflect")
    assert str(dev.value) == str(cpu.value)


def _grid_sample(interp, padding, align):
    def fn(t, g):
        return F.grid_sample(t, g, mode=interp, padding_mode=padding, align_corners=align)

    return fn


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_every_padding_mode(padding):
    x = torch.randn(2, 3, 5, 4)
    grid = torch.rand(2, 6, 7, 2) * 2.6 - 1.3  # points outside [-1, 1] too
    x3 = torch.randn(1, 2, 3, 4, 5)
    grid3 = torch.rand(1, 2, 3, 4, 3) * 2.6 - 1.3
    for align in [False, True]:
        for interp in ["bilinear", "nearest"]:
            _check(_grid_sample(interp, padding, align), x, grid, atol=1e-4, rtol=1e-4)
            _check(_grid_sample(interp, padding, align), x3, grid3, atol=1e-4, rtol=1e-4)
        _check(_grid_sample("bicubic", padding, align), x, grid, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", ["debug", "defer_and_fuse"])
def test_grid_sample_in_the_other_eager_modes(mode):
    x, grid = torch.randn(2, 3, 5, 4), torch.rand(2, 6, 7, 2) * 2.6 - 1.3
    with torchtpu.eager_mode(mode):
        _check(_grid_sample("bilinear", "reflection", False), x, grid, atol=1e-4, rtol=1e-4)
        _check(_grid_sample("bicubic", "border", True), x, grid, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("bag_mode", ["sum", "mean", "max"])
def test_embedding_bag_modes(mode, bag_mode):
    weight = torch.randn(10, 3)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 4])
    offsets = torch.tensor([0, 4, 4, 7])  # bag 1 is empty
    with torchtpu.eager_mode(mode):
        _check(lambda w, i, o: F.embedding_bag(i, w, o, mode=bag_mode), weight, indices, offsets)
        _check(lambda w, i, o: F.embedding_bag(i, w, o, mode=bag_mode, padding_idx=4,
                                               include_last_offset=True),
               weight, indices, offsets)
        _check(lambda w, i: F.embedding_bag(i, w, mode=bag_mode), weight, indices.reshape(2, 5))
        if bag_mode == "sum":
            psw = torch.randn(10)
            _check(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
                   weight, indices, offsets, psw)


def _raises_like_cpu(fn, *inputs, match):
    with pytest.raises(RuntimeError, match=match):
        fn(*inputs)
    with pytest.raises(RuntimeError, match=match):
        fn(*(t.to("tpu") for t in inputs)).cpu()
    torch.arange(3, device="tpu").cpu()  # reported once: the next read is clean


@pytest.mark.parametrize("mode", MODES)
def test_out_of_range_indices_raise_through_the_device_checks(mode):
    weight = torch.randn(5, 3)
    with torchtpu.eager_mode(mode):
        for bad in [7, -1]:
            _raises_like_cpu(lambda w, i, o: F.embedding_bag(i, w, o), weight,
                             torch.tensor([1, bad]), torch.tensor([0]),
                             match=f"takes value {bad} which is not in the valid range \\[0, 5\\)")
        _raises_like_cpu(lambda x, i: F.max_unpool2d(x, i, 2), torch.randn(1, 1, 2, 2),
                         torch.tensor([[[[0, 1], [2, 19]]]]),
                         match="Found an invalid max index: 19 \\(output volumes are of size 4x4")


def test_max_unpool_and_fold_unfold():
    x = torch.randn(2, 3, 8, 6)
    _, idx = F.max_pool2d(x, 2, return_indices=True)
    _check(lambda t, i: F.max_unpool2d(t, i, 2), F.max_pool2d(x, 2), idx)
    _check(lambda t: F.unfold(t, (3, 2), dilation=(1, 2), padding=1, stride=(2, 1)), x)
    cols = torch.randn(2, 12, 9)
    _check(lambda t: F.fold(t, (5, 6), (2, 2), padding=(1, 0), stride=(2, 2)), cols)
    _check(lambda t: t.unfold(1, 3, 2), torch.randn(4, 9, 2))


def test_float64_weights_and_integer_nearest():
    """float64 computes its taps in double, as the CPU does; nearest copies integers exactly."""
    x = torch.randn(2, 3, 5, 7, dtype=torch.float64)
    _check(lambda t: F.interpolate(t, scale_factor=1.3, mode="bilinear"), x,
           atol=1e-12, rtol=1e-12)
    _check(lambda t: F.interpolate(t, size=(4, 3), mode="bicubic", antialias=True), x,
           atol=1e-12, rtol=1e-12)
    u = torch.randint(0, 255, (1, 3, 4, 5), dtype=torch.uint8)
    _check(lambda t: F.interpolate(t, scale_factor=2.5, mode="nearest"), u, grad=False)


@pytest.mark.parametrize("mode,antialias", [("bilinear", False), ("bicubic", False),
                                            ("bilinear", True), ("bicubic", True)])
def test_uint8_images_interpolate_rounded_and_saturated(mode, antialias, each_eager_mode):
    """A uint8 image is interpolated in float32 and each pass rounded half up and saturated to
    0..255, as the CPU's separable kernel stores it (its fixed-point weights may round a value
    one the other way). Its weights had been computed in uint8: every value was 0."""
    torch.manual_seed(0)
    u = torch.randint(0, 256, (2, 3, 17, 23), dtype=torch.uint8)
    u[0, 0, :4] = 255  # bicubic overshoots above a saturated edge, and below 0 beside it
    u[0, 0, 4:8] = 0
    for size in [(9, 31), (40, 12)]:
        expected = F.interpolate(u, size=size, mode=mode, antialias=antialias)
        got = F.interpolate(u.to("tpu"), size=size, mode=mode, antialias=antialias).cpu()
        assert got.dtype == torch.uint8
        difference = (got.int() - expected.int()).abs()
        assert difference.max() <= (2 if mode == "bicubic" else 1)
        assert (difference > 0).float().mean() < 0.05


def _bags_of_embeddings(i, w, o, mode, padding_idx, psw=None):
    """embedding_bag(scale_grad_by_freq=True) built from F.embedding, whose gradient divides each
    row by its index's frequency, as CUDA's embedding_bag does. (The CPU's embedding_bag in
    PyTorch 2.13 divides a row by another index's count where counts differ:
    pytorch/pytorch#190063.)"""
    rows = F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=True)
    kept = (i != (-1 if padding_idx is None else padding_idx)).to(w.dtype)[:, None]
    rows = rows * kept * (1 if psw is None else psw[:, None])
    bag = (o[None, :] <= torch.arange(len(i))[:, None]).sum(1) - 1
    out = torch.zeros(len(o), w.shape[1]).index_add(0, bag, rows)
    if mode == "mean":
        out = out / torch.zeros(len(o), 1).index_add(0, bag, kept).clamp_min(1)
    return out


@pytest.mark.parametrize("mode", MODES)
def test_embedding_bag_scale_grad_by_freq_divides_by_each_indexs_frequency(mode):
    weight = torch.randn(10, 3)
    indices = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0, 4])  # 4 three times, 2 twice
    offsets = torch.tensor([0, 4, 4, 7])
    psw = torch.randn(10)
    cases = [("sum", None, None), ("mean", None, None), ("mean", 2, None), ("sum", 4, psw)]
    with torchtpu.eager_mode(mode):
        for bag_mode, padding_idx, p in cases:
            w = weight.clone().requires_grad_()
            expected = _bags_of_embeddings(indices, w, offsets, bag_mode, padding_idx, p)
            w_tpu = weight.to("tpu").requires_grad_()
            before = _fallbacks()
            got = F.embedding_bag(indices.to("tpu"), w_tpu, offsets.to("tpu"), mode=bag_mode,
                                  padding_idx=padding_idx,
                                  per_sample_weights=None if p is None else p.to("tpu"),
                                  scale_grad_by_freq=True)
            torch.testing.assert_close(got.cpu(), expected.detach())
            loss = torch.linspace(-1, 1, expected.numel()).reshape(expected.shape)
            (expected * loss).sum().backward()
            (got * loss.to("tpu")).sum().backward()
            torch.testing.assert_close(w_tpu.grad.cpu(), w.grad)
            assert _fallbacks() == before, "ran on the CPU"


def test_embedding_bag_reference_is_the_cpus_gradient_where_counts_are_equal():
    """Where every index occurs equally often, the CPU's embedding_bag is right: the reference
    above must agree with it there."""
    indices, offsets = torch.tensor([3, 1, 3, 1, 7, 7]), torch.tensor([0, 3])
    for bag_mode in ["sum", "mean"]:
        w1, w2 = (torch.randn(8, 2, generator=torch.Generator().manual_seed(0)).requires_grad_()
                  for _ in range(2))
        F.embedding_bag(indices, w1, offsets, mode=bag_mode, scale_grad_by_freq=True).sum().backward()
        _bags_of_embeddings(indices, w2, offsets, bag_mode, None).sum().backward()
        torch.testing.assert_close(w1.grad, w2.grad)


FRACTIONAL_CASES = [  # (input shape, kernel, output size, samples' shape)
    ((2, 3, 7, 9), (2, 3), (4, 5), (2, 3, 2)), ((2, 3, 7, 9), (3, 3), (5, 7), (2, 3, 2)),
    ((2, 3, 7, 9), (2, 2), (1, 1), (2, 3, 2)), ((2, 3, 7, 9), (1, 1), (7, 9), (2, 3, 2)),
    ((2, 3, 7, 9), (0, 3), (4, 5), (2, 3, 2)), ((2, 3, 7, 9), (2, 3), (0, 5), (2, 3, 2)),
    ((3, 7, 9), (2, 3), (4, 5), (1, 3, 2)), ((2, 3, 7, 9), (2, 3), (4, 5), (4, 3, 2)),
    ((2, 2, 5, 6, 7), (2, 2, 3), (3, 4, 4), (2, 2, 3)),
    ((2, 5, 6, 7), (2, 3, 2), (2, 2, 5), (1, 2, 3)),
]


@pytest.mark.parametrize("case", FRACTIONAL_CASES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_fractional_max_pool_matches_the_cpu_for_given_samples(case, dtype, each_eager_mode,
                                                                fallback_error):
    """The windows follow from the samples: with the same samples, values and indices equal the
    CPU's, NaN (the last one in a window wins) and ties (the first) included, and gradients."""
    shape, kernel, size, samples_shape = case
    op = torch.ops.aten.fractional_max_pool2d if len(kernel) == 2 else \
        torch.ops.aten.fractional_max_pool3d
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=dtype)
    x.view(-1)[3:5] = float("nan")
    x.view(-1)[-20:] = 1.0
    samples = torch.rand(samples_shape, dtype=dtype)
    xc, xt = x.clone().requires_grad_(), x.to("tpu").requires_grad_()
    values, indices = op(xc, kernel, size, samples)
    got_values, got_indices = op(xt, kernel, size, samples.to("tpu"))
    torch.testing.assert_close(got_values.detach().cpu(), values.detach(), equal_nan=True,
                               rtol=0, atol=0)
    assert torch.equal(got_indices.cpu(), indices)
    if values.numel() and torch.isfinite(values).all():
        values.sum().backward()
        got_values.sum().backward()
        torch.testing.assert_close(xt.grad.cpu(), xc.grad)


def test_fractional_max_pool_draws_on_the_device_and_refuses_as_the_cpu(fallback_error):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 9, device="tpu")
    values, indices = F.fractional_max_pool2d(x, 3, output_ratio=(0.5, 0.5), return_indices=True)
    assert values.shape == (2, 3, 4, 4) and indices.device.type == "tpu"
    assert F.fractional_max_pool3d(x[:, :, None].expand(2, 3, 4, 9, 9), 2,
                                   output_size=(2, 3, 3)).shape == (2, 3, 2, 3, 3)
    bad = [lambda d: torch.ops.aten.fractional_max_pool2d(
               torch.randn(1, 2, 7, 9, device=d), (5, 3), (4, 5), torch.rand(1, 2, 2, device=d)),
           lambda d: torch.ops.aten.fractional_max_pool2d(
               torch.randn(1, 2, 7, 9, device=d), (2, 3), (4, 5), torch.rand(1, 2, 3, device=d)),
           lambda d: torch.ops.aten.fractional_max_pool2d(
               torch.randn(7, 9, device=d), (2, 3), (4, 5), torch.rand(1, 1, 2, device=d)),
           lambda d: torch.ops.aten.fractional_max_pool2d(
               torch.randn(1, 2, 7, 9, device=d), (2, 3), (4, 5),
               torch.rand(1, 2, 2, device=d, dtype=torch.float64)),
           lambda d: torch.ops.aten.fractional_max_pool2d(
               torch.ones(1, 2, 7, 9, device=d, dtype=torch.long), (2, 3), (4, 5),
               torch.ones(1, 2, 2, device=d, dtype=torch.long)),
           lambda d: torch.ops.aten.fractional_max_pool2d(
               torch.randn(2, 2, 7, 9, device=d), (2, 3), (4, 5), torch.rand(1, 2, 2, device=d))]
    for call in bad:
        with pytest.raises(Exception) as cpu:
            call("cpu")
        with pytest.raises(cpu.type, match=re.escape(str(cpu.value).splitlines()[0])):
            call("tpu")
