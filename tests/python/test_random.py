"""Random numbers from the device generator: reproducible from a seed, with the right law."""

import pytest
import torch

import torchtpu


def draw_all():
    return [torch.rand(64, device="tpu").cpu(), torch.randn(64, device="tpu").cpu(),
            torch.randint(-5, 5, (64,), device="tpu").cpu(),
            torch.bernoulli(torch.full((64,), 0.3, device="tpu")).cpu()]


def test_manual_seed_reproduces_the_sequence():
    torch.manual_seed(123)
    first = draw_all()
    torch.manual_seed(123)
    second = draw_all()
    for a, b in zip(first, second):
        assert torch.equal(a, b)
    torch.manual_seed(124)
    assert not torch.equal(draw_all()[0], first[0])


def test_rng_state_round_trips():
    torch.manual_seed(5)
    torch.rand(3, device="tpu")
    state = torch.tpu.get_rng_state()
    expected = torch.rand(8, device="tpu").cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(8, device="tpu").cpu(), expected)


def test_rng_state_is_seed_and_offset():
    """CUDA's layout (DTensor's RNG tracker reads and moves it): 8 bytes of seed, 8 of offset."""
    torch.manual_seed(11)
    state = torch.tpu.get_rng_state()
    assert state.numel() == 16
    assert state[:8].view(torch.int64).item() == 11 and state[8:].view(torch.int64).item() == 0
    torch.rand(10, device="tpu")
    moved = torch.tpu.get_rng_state()
    assert moved[:8].view(torch.int64).item() == 11 and moved[8:].view(torch.int64).item() > 0
    at_offset = state.clone()
    at_offset[8:] = torch.tensor([1000], dtype=torch.int64).view(torch.uint8)
    torch.tpu.set_rng_state(at_offset)
    a = torch.rand(8, device="tpu").cpu()
    torch.tpu.set_rng_state(at_offset)
    assert torch.equal(torch.rand(8, device="tpu").cpu(), a)
    torch.tpu.set_rng_state(state)
    assert not torch.equal(torch.rand(8, device="tpu").cpu(), a)


def test_explicit_generator_is_independent_of_the_default():
    g = torch.Generator(device="tpu").manual_seed(9)
    a = torch.rand(16, device="tpu", generator=g).cpu()
    torch.rand(16, device="tpu")  # advances the default generator only
    g.manual_seed(9)
    assert torch.equal(torch.rand(16, device="tpu", generator=g).cpu(), a)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_uniform_and_normal_statistics(dtype):
    torch.manual_seed(0)
    u = torch.empty(200_000, dtype=dtype, device="tpu").uniform_(2, 5).cpu().double()
    assert u.min() >= 2 and u.max() < 5
    assert abs(u.mean() - 3.5) < 0.02 and abs(u.var() - 0.75) < 0.02
    n = torch.empty(200_000, dtype=dtype, device="tpu").normal_(1.0, 2.0).cpu().double()
    assert abs(n.mean() - 1.0) < 0.03 and abs(n.std() - 2.0) < 0.03


def test_integers_cover_their_range():
    torch.manual_seed(0)
    r = torch.randint(3, 9, (50_000,), device="tpu").cpu()
    assert r.dtype == torch.int64
    assert set(r.unique().tolist()) == set(range(3, 9))
    b = torch.empty(1000, dtype=torch.bool, device="tpu").random_().cpu()
    assert 300 < int(b.sum()) < 700
    u8 = torch.empty(10_000, dtype=torch.uint8, device="tpu").random_().cpu()
    assert int(u8.max()) > 250


def test_bernoulli_and_dropout():
    torch.manual_seed(0)
    p = torch.linspace(0, 1, 5).repeat(20_000).to("tpu")
    draws = torch.bernoulli(p).cpu().view(-1, 5).mean(0)
    torch.testing.assert_close(draws, torch.linspace(0, 1, 5), atol=0.01, rtol=0)
    x = torch.ones(100_000, device="tpu", requires_grad=True)
    y = torch.nn.functional.dropout(x, 0.25)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.01
    assert torch.allclose(y[y != 0].cpu(), torch.tensor(1 / 0.75))
    y.sum().backward()
    assert torch.equal((x.grad != 0).cpu(), (y != 0).cpu())
    assert torch.equal(torch.nn.functional.dropout(x, 0.25, training=False).cpu(), x.detach().cpu())


def test_random_ops_do_not_fall_back(fallback_error):
    torch.rand(4, device="tpu")
    torch.randn(2, 2, device="tpu")
    torch.randint(10, (3,), device="tpu")
    torch.empty(3, device="tpu").uniform_()
    torch.nn.functional.dropout(torch.ones(8, device="tpu"), 0.5)


def test_bad_arguments_raise_like_cpu():
    with pytest.raises(RuntimeError, match="uniform_ expects to return a \\[from, to\\) range"):
        torch.empty(2, device="tpu").uniform_(3, 1)
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        torch.empty(2, device="tpu").normal_(0, -1)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to'"):
        torch.empty(2, device="tpu").random_(5, 3)


def test_draws_stay_on_device_and_compile_once():
    torch.rand(32, device="tpu")
    before = torchtpu.metrics()["executable_cache_misses"]
    for _ in range(5):
        torch.rand(32, device="tpu")
    assert torchtpu.metrics()["executable_cache_misses"] == before


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_draws_have_the_cpu_law(dtype, each_eager_mode):
    # As on the CPU: randn's parts have variance 1/2 each, rand's lie in [0, 1), normal_(m, s)
    # gives parts of mean m and variance s^2 / 2, uniform_(a, b) parts in [a, b).
    torch.manual_seed(0)
    z = torch.randn(200_000, dtype=dtype, device="tpu").cpu()
    assert z.dtype == dtype
    for part in (z.real.double(), z.imag.double()):
        assert abs(part.mean()) < 0.01 and abs(part.var() - 0.5) < 0.01
    assert abs(torch.corrcoef(torch.stack([z.real, z.imag]).double())[0, 1]) < 0.01
    u = torch.rand(200_000, dtype=dtype, device="tpu").cpu()
    for part in (u.real, u.imag):
        assert part.min() >= 0 and part.max() < 1 and abs(part.double().mean() - 0.5) < 0.01
    n = torch.empty(200_000, dtype=dtype, device="tpu").normal_(1.0, 2.0).cpu()
    for part in (n.real.double(), n.imag.double()):
        assert abs(part.mean() - 1.0) < 0.02 and abs(part.var() - 2.0) < 0.04
    v = torch.empty(10_000, dtype=dtype, device="tpu").uniform_(2, 5).cpu()
    assert v.real.min() >= 2 and v.imag.max() < 5


def test_complex_draws_replay_from_the_seed(each_eager_mode):
    torch.manual_seed(7)
    first = [torch.randn(16, dtype=torch.complex64, device="tpu").cpu(),
             torch.rand(16, dtype=torch.complex64, device="tpu").cpu()]
    torch.manual_seed(7)
    second = [torch.randn(16, dtype=torch.complex64, device="tpu").cpu(),
              torch.rand(16, dtype=torch.complex64, device="tpu").cpu()]
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(first[0].real, first[0].imag)


def test_complex_draws_do_not_fall_back(fallback_error):
    torch.randn(4, dtype=torch.complex64, device="tpu")
    torch.empty(4, dtype=torch.complex128, device="tpu").uniform_()


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool])
def test_draws_of_non_floating_dtypes_raise_like_cpu(dtype):
    for draw in (lambda t: t.normal_(), lambda t: t.uniform_()):
        with pytest.raises(NotImplementedError):
            draw(torch.empty(2, dtype=dtype))
        with pytest.raises(NotImplementedError, match="not implemented for"):
            draw(torch.empty(2, dtype=dtype, device="tpu"))


def test_dropout_keeps_nan_and_signed_zeros_as_cpu(each_eager_mode):
    # CPU computes input * mask * scale: a dropped NaN stays NaN, a dropped -1. gives -0.
    torch.manual_seed(0)
    y = torch.nn.functional.dropout(torch.full((1000,), float("nan"), device="tpu"), 0.5).cpu()
    assert y.isnan().all()
    z = torch.nn.functional.dropout(-torch.ones(1000, device="tpu"), 0.5).cpu()
    dropped = z == 0
    assert 300 < int(dropped.sum()) < 700 and torch.signbit(z[dropped]).all()
    assert torch.equal(z[~dropped], torch.full_like(z[~dropped], -2.0))
