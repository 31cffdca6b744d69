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
    for name in sorted(LAWS):
        LAWS[name]("tpu")


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


# Every random ATen op with the laws it draws from: fn(device) gives a tensor of draws, or a list
# of them each compared on its own (the columns of draws without replacement, rows of other laws).
# The CPU draws the same law from its own generator: the two samples are compared by their
# largest distance between empirical distribution functions (two-sample Kolmogorov-Smirnov).
N = 20_000
MEAN, STD = torch.randn(N, generator=torch.Generator().manual_seed(1)) * 5, \
    torch.rand(N, generator=torch.Generator().manual_seed(2)) * 3
FOUR = [0.1, 0.2, 0.3, 0.4, 0.0]


def columns(t):
    return list(t.unbind(-1))


LAWS = {
    "exponential_": lambda d: torch.empty(N, device=d).exponential_(2.0),
    "exponential_.float64": lambda d: torch.empty(N, device=d, dtype=torch.float64).exponential_(),
    "exponential_.bfloat16": lambda d: torch.empty(N, device=d, dtype=torch.bfloat16)
    .exponential_(0.5),
    "geometric_": lambda d: torch.empty(N, device=d).geometric_(0.3),
    "geometric_.int64": lambda d: torch.empty(N, device=d, dtype=torch.long).geometric_(0.05),
    "geometric_.uint8": lambda d: torch.empty(N, device=d, dtype=torch.uint8).geometric_(0.5),
    "log_normal_": lambda d: torch.empty(N, device=d).log_normal_(0.5, 0.75),
    "log_normal_.float16": lambda d: torch.empty(N, device=d, dtype=torch.half).log_normal_(),
    "cauchy_": lambda d: torch.empty(N, device=d).cauchy_(1, 2),
    "cauchy_.float64": lambda d: torch.empty(N, device=d, dtype=torch.float64).cauchy_(),
    # normal() with tensor arguments, standardized by them: N(0, 1) for every element.
    "normal.Tensor_Tensor": lambda d: (torch.normal(MEAN.to(d), STD.to(d)).cpu() - MEAN) / STD,
    "normal.Tensor_float": lambda d: torch.normal(MEAN.to(d), 2.0).cpu() - MEAN,
    "normal.float_Tensor": lambda d: (torch.normal(3.0, STD.to(d)).cpu() - 3) / STD,
    "normal.Tensor_Tensor_out": lambda d: torch.normal(
        torch.zeros(N // 100, 1, device=d), torch.ones(100, device=d),
        out=torch.empty(0, device=d)),
    "multinomial": lambda d: columns(torch.multinomial(
        torch.tensor(FOUR, device=d).expand(N // 2, 5), 3)),
    "multinomial.one": lambda d: torch.multinomial(
        torch.tensor([1.0, 2, 3, 4], device=d).expand(N, 4), 1),
    "multinomial.float16_all": lambda d: columns(torch.multinomial(
        torch.tensor([1.0, 2, 3, 4], device=d, dtype=torch.half).expand(N // 4, 4), 4)),
    "multinomial.replacement": lambda d: list(torch.multinomial(
        torch.tensor([[0.1, 0.0, 0.3, 0.6], [5, 1, 0, 0]], device=d), N // 2, True)),
    "multinomial.out": lambda d: torch.multinomial(
        torch.tensor(FOUR, device=d), N, True, out=torch.empty(0, device=d, dtype=torch.long)),
    "randperm": lambda d: columns(torch.stack([torch.randperm(6, device=d) for _ in range(300)])),
    "randperm.float32": lambda d: columns(torch.stack(
        [torch.randperm(4, device=d, dtype=torch.float32) for _ in range(300)])),
    "rrelu_with_noise": lambda d: torch.nn.functional.rrelu(
        -torch.ones(N, device=d), 0.1, 0.4, training=True),
    "bernoulli.out": lambda d: torch.bernoulli(torch.full((N,), 0.3, device=d),
                                               out=torch.empty(N, device=d)),
    # Rejection samplers: each branch of each (small and large parameters, float64).
    "_standard_gamma.0.3": lambda d: torch._standard_gamma(torch.full((N,), 0.3, device=d)),
    "_standard_gamma.2.5": lambda d: torch._standard_gamma(torch.full((N,), 2.5, device=d)),
    "_standard_gamma.float64": lambda d: torch._standard_gamma(
        torch.full((N,), 1e4, device=d, dtype=torch.float64)),
    "_sample_dirichlet": lambda d: columns(torch._sample_dirichlet(
        torch.tensor([0.5, 1, 3], device=d).expand(N // 2, 3))),
    "_sample_dirichlet.small": lambda d: columns(torch._sample_dirichlet(
        torch.tensor([0.05, 0.1, 2], device=d, dtype=torch.float64).expand(N // 2, 3))),
    "poisson.small": lambda d: torch.poisson(torch.full((N,), 0.5, device=d)),
    "poisson.below_10": lambda d: torch.poisson(torch.full((N,), 7.0, device=d)),
    "poisson.large": lambda d: torch.poisson(torch.full((N,), 300.0, device=d)),
    "poisson.huge": lambda d: torch.poisson(torch.full((N,), 1e6, device=d)),
    "poisson.mixed": lambda d: list(torch.poisson(
        torch.tensor([0.0, 3, 50], device=d).repeat(N // 2, 1)).unbind(-1)),
    "binomial.inversion": lambda d: torch.binomial(torch.full((N,), 10.0, device=d),
                                                   torch.full((N,), 0.3, device=d)),
    "binomial.inversion_flipped": lambda d: torch.binomial(torch.full((N,), 10.0, device=d),
                                                           torch.full((N,), 0.8, device=d)),
    "binomial.btrs": lambda d: torch.binomial(torch.full((N,), 100.0, device=d),
                                              torch.full((N,), 0.4, device=d)),
    "binomial.btrs_flipped": lambda d: torch.binomial(torch.full((N,), 1000.0, device=d),
                                                      torch.full((N,), 0.97, device=d)),
    "binomial.float64": lambda d: torch.binomial(
        torch.full((N,), 1e6, device=d, dtype=torch.float64),
        torch.full((N,), 0.3, device=d, dtype=torch.float64)),
}


def ks_distance(a, b):
    a, b = a.double().flatten().sort().values, b.double().flatten().sort().values
    at = torch.cat([a, b])
    return (torch.searchsorted(a, at, right=True) / a.numel()
            - torch.searchsorted(b, at, right=True) / b.numel()).abs().max().item()


def ks_bound(n, m):
    """The distance two samples of one law exceed with probability 1e-4."""
    return 2.23 * ((n + m) / (n * m)) ** 0.5


def as_list(draws):
    return draws if isinstance(draws, list) else [draws]


@pytest.mark.parametrize("name", sorted(LAWS))
def test_draws_have_the_cpu_law(name, fallback_error):
    torch.manual_seed(0)
    expected, got = as_list(LAWS[name]("cpu")), as_list(LAWS[name]("tpu"))
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape
        assert ks_distance(e, g.cpu()) < ks_bound(e.numel(), g.numel()), name


def test_the_law_check_tells_close_laws_apart():
    torch.manual_seed(0)
    a = torch.empty(N, device="tpu").exponential_(2.0).cpu()
    b = torch.empty(N, device="tpu").exponential_(2.3).cpu()
    assert ks_distance(a, b) > ks_bound(N, N)
    p = torch.tensor([0.1, 0.2, 0.3, 0.4], device="tpu")
    q = torch.tensor([0.1, 0.24, 0.26, 0.4], device="tpu")
    assert ks_distance(torch.multinomial(p, N, True).cpu(),
                       torch.multinomial(q, N, True).cpu()) > ks_bound(N, N)


def test_multinomial_draws_only_categories_it_may(each_eager_mode):
    torch.manual_seed(0)
    p = torch.tensor([[0.0, 3, 0, 1, 0], [0, 0, 0, 0, 2], [1e-30, 0, 0, 0, 0]], device="tpu")
    rows = torch.multinomial(p, 2000, replacement=True).cpu()
    assert set(rows[0].unique().tolist()) == {1, 3}
    assert (rows[1] == 4).all() and (rows[2] == 0).all()
    # Without replacement: each category at most once, those of probability 0 only once the
    # others are used up.
    draws = torch.multinomial(torch.tensor(FOUR, device="tpu").expand(500, 5), 5).cpu()
    assert (draws.sort(-1).values == torch.arange(5)).all() and (draws[:, 4] == 4).all()
    one = torch.multinomial(torch.tensor([0.0, 0, 7, 0], device="tpu"), 1)
    assert one.shape == (1,) and one.item() == 2


def test_randperm_gives_permutations_in_each_dtype():
    torch.manual_seed(0)
    for dtype, n in [(torch.int64, 1000), (torch.int32, 33), (torch.float32, 17),
                     (torch.float16, 2049), (torch.uint8, 256), (torch.bfloat16, 9)]:
        r = torch.randperm(n, device="tpu", dtype=dtype).cpu()
        assert r.dtype == dtype and torch.equal(r.sort().values, torch.arange(n, dtype=dtype))
    assert torch.randperm(0, device="tpu").shape == (0,)
    assert torch.randperm(1, device="tpu").tolist() == [0]


def test_rrelu_keeps_its_slopes_in_noise(each_eager_mode):
    torch.manual_seed(0)
    x = torch.tensor([1.0, -2, 0, float("nan"), -0.0, -5, 3], device="tpu", requires_grad=True)
    noise = torch.empty(7, device="tpu")
    y = torch.ops.aten.rrelu_with_noise(x, noise, 0.1, 0.4, True)
    y.sum().backward()
    y, noise, grad = y.detach().cpu(), noise.cpu(), x.grad.cpu()
    negative = torch.tensor([False, True, True, False, True, True, False])
    assert ((noise[negative] >= 0.1) & (noise[negative] <= 0.4)).all()
    assert (noise[~negative] == 1).all()
    expected = x.detach().cpu() * noise
    torch.testing.assert_close(y, expected, equal_nan=True)
    assert torch.signbit(y[4]) and torch.equal(grad, noise)
    # Not training: leaky_relu with the middle slope, as on the CPU.
    xc = x.detach().cpu()
    torch.testing.assert_close(
        torch.nn.functional.rrelu(x.detach(), 0.1, 0.3, training=False).cpu(),
        torch.nn.functional.leaky_relu(xc, 0.2), equal_nan=True)


def test_new_draws_replay_from_the_seed_in_every_mode_and_compiled(fallback_error):
    def draws(p, m, s, x):
        return (torch.multinomial(p, 2), torch.normal(m, s), torch.empty_like(m).exponential_(),
                torch.multinomial(p, 5, replacement=True),
                torch.nn.functional.rrelu(x, training=True), torch.randperm(6, device=p.device),
                torch.empty_like(m).geometric_(0.2), torch.empty_like(m).cauchy_(),
                torch.empty_like(m).log_normal_(), torch._standard_gamma(s * 2),
                torch.poisson(s * 20), torch.binomial(s * 30, s / 3),
                torch._sample_dirichlet(p))

    args = (torch.rand(3, 4, device="tpu"), torch.zeros(5, device="tpu"),
            torch.ones(5, device="tpu"), torch.randn(6, device="tpu"))
    results = {}
    for mode in ("strict", "debug", "defer_and_fuse"):
        with torchtpu.eager_mode(mode):
            torch.manual_seed(3)
            results[mode] = [t.cpu() for t in draws(*args)]
    compiled = torch.compile(draws, backend="tpu")
    for run in ("compiled", "compiled again"):
        torch.manual_seed(3)
        results[run] = [t.cpu() for t in compiled(*args)]
    for run, got in results.items():
        assert all(torch.equal(a, b) for a, b in zip(got, results["strict"])), run


def cpu_error(fn):
    """The exception fn("cpu") raises, its message with the CPU's kernel names made tpu's."""
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    return cpu.type, str(cpu.value).splitlines()[0].replace("_cpu", "_tpu")


# Bad arguments, checked on the host as the CPU does, or on the device (the values of a tensor
# argument: the error comes at the next wait, here the .cpu()).
BAD_DRAWS = [
    lambda d: torch.zeros(3, device=d, dtype=torch.long).exponential_(),
    lambda d: torch.zeros(3, device=d).exponential_(0),
    lambda d: torch.zeros(3, device=d, dtype=torch.complex64).exponential_(),
    lambda d: torch.zeros(3, device=d, dtype=torch.bool).geometric_(0.5),
    lambda d: torch.zeros(3, device=d).geometric_(1),
    lambda d: torch.zeros(3, device=d, dtype=torch.long).log_normal_(),
    lambda d: torch.zeros(3, device=d).log_normal_(1, 0),
    lambda d: torch.zeros(3, device=d, dtype=torch.long).cauchy_(),
    lambda d: torch.zeros(3, device=d).cauchy_(0, -1),
    lambda d: torch.normal(torch.zeros(3, device=d), -torch.ones(3, device=d)).cpu(),
    lambda d: torch.normal(torch.zeros(3, device=d), torch.tensor([1, torch.nan, 1], device=d))
    .cpu(),
    lambda d: torch.normal(1.0, -torch.ones(3, device=d)).cpu(),
    lambda d: torch.normal(torch.zeros(3, device=d), -1.0),
    lambda d: torch.normal(torch.zeros(3, device=d, dtype=torch.long), torch.ones(3, device=d)),
    lambda d: torch.normal(torch.zeros(3, device=d), torch.ones(2, device=d)),
    lambda d: torch.normal(torch.zeros(3, device=d), torch.ones(3, device=d).to(torch.cfloat)),
    lambda d: torch.multinomial(torch.ones(3, device=d), 4),
    lambda d: torch.multinomial(torch.ones(3, device=d), 0),
    lambda d: torch.multinomial(torch.tensor([1.0, -1], device=d), 1).cpu(),
    lambda d: torch.multinomial(torch.tensor([[1.0, 1], [0, 0]], device=d), 2).cpu(),
    lambda d: torch.multinomial(torch.tensor([0.0, torch.nan], device=d), 1).cpu(),
    lambda d: torch.multinomial(torch.tensor([0.0, torch.inf], device=d), 1, True).cpu(),
    lambda d: torch.multinomial(torch.tensor([0.0, torch.inf], device=d), 3, True).cpu(),
    lambda d: torch.multinomial(torch.tensor([1.0, -1], device=d), 3, True).cpu(),
    lambda d: torch.multinomial(torch.tensor([0.0, 0], device=d), 3, True).cpu(),
    lambda d: torch.multinomial(torch.ones(2, 2, 2, device=d), 1),
    lambda d: torch.multinomial(torch.ones(3, dtype=torch.long, device=d), 1),
    lambda d: torch.multinomial(torch.ones(3, 0, device=d), 1),
    lambda d: torch.multinomial(torch.ones(3, device=d), 2, out=torch.empty(2, device=d)),
    lambda d: torch.randperm(-1, device=d),
    lambda d: torch.randperm(300, dtype=torch.uint8, device=d),
    lambda d: torch.randperm(5, dtype=torch.bool, device=d),
    lambda d: torch.randperm(3000, dtype=torch.half, device=d),
    lambda d: torch.nn.functional.rrelu(torch.zeros(3, dtype=torch.long, device=d),
                                        training=True),
    lambda d: torch.nn.functional.rrelu(torch.zeros(3, device=d), 0.5, 0.1, training=True),
    lambda d: torch._standard_gamma(torch.ones(3, device=d, dtype=torch.long)),
    lambda d: torch._sample_dirichlet(torch.ones(3, device=d, dtype=torch.long)),
    lambda d: torch.poisson(torch.ones(3, device=d, dtype=torch.long)),
    lambda d: torch.poisson(torch.tensor([1.0, -1], device=d)).cpu(),
    lambda d: torch.poisson(torch.tensor([1.0, torch.nan], device=d)).cpu(),
    lambda d: torch.binomial(torch.ones(3, device=d, dtype=torch.long),
                             torch.ones(3, device=d, dtype=torch.long)),
    lambda d: torch.binomial(torch.ones(3, device=d, dtype=torch.float64),
                             torch.ones(3, device=d)),
]


@pytest.mark.parametrize("case", range(len(BAD_DRAWS)))
def test_bad_draws_raise_the_cpu_error(case):
    fn = BAD_DRAWS[case]
    kind, message = cpu_error(fn)
    with pytest.raises(kind) as tpu:
        fn("tpu")
    # A device-side check names the op and the line that called it around the CPU's message.
    assert message in str(tpu.value), (message, str(tpu.value))


def test_rejection_samplers_edge_values_are_the_cpu_ones(fallback_error):
    # Gamma: at least the smallest normal value (also for NaN, 0 or negative alpha); +inf for +inf.
    nan, inf = float("nan"), float("inf")
    alpha = torch.tensor([0.0, -1, nan, inf, 1e-3, 1e-8])
    torch.testing.assert_close(torch._standard_gamma(alpha.to("tpu")).cpu(),
                               torch._standard_gamma(alpha))
    # Dirichlet: each gamma draw counts as at least float64's smallest normal value, so rows of
    # tiny alphas are uniform; a result is at least the type's smallest normal value.
    rows = torch.tensor([[1e-8, 1e-8, 1e-8], [0, 0, 0], [inf, 1, 1], [1e-9, 1e3, 1e-9]])
    torch.testing.assert_close(torch._sample_dirichlet(rows.to("tpu")).cpu(),
                               torch._sample_dirichlet(rows))
    assert torch._sample_dirichlet(torch.tensor(2.0, device="tpu")).item() == 1.0
    assert torch.equal(torch.poisson(torch.tensor([0.0, 0.0], device="tpu")).cpu(),
                       torch.zeros(2))
    # Binomial: count <= 0 or p <= 0 give 0, p >= 1 gives the count, a NaN p gives NaN (and, where
    # the CPU loops forever, a NaN count too).
    count = torch.tensor([0.0, 10, 10, 10, -1, 10, 7])
    prob = torch.tensor([0.5, 0, 1, 1.5, 0.5, nan, -0.1])
    torch.testing.assert_close(torch.binomial(count.to("tpu"), prob.to("tpu")).cpu(),
                               torch.binomial(count, prob), equal_nan=True)
    assert torch.binomial(torch.tensor([nan], device="tpu"),
                          torch.tensor([0.5], device="tpu")).isnan().all()


def test_empty_draws_and_outputs_take_their_shapes():
    assert torch.zeros(0, device="tpu").cauchy_().shape == (0,)
    assert torch.multinomial(torch.ones(0, 3, device="tpu"), 2).shape == (0, 2)
    out = torch.empty(5, device="tpu", dtype=torch.long)
    assert torch.bernoulli(torch.ones(2, 3, device="tpu"), out=out).shape == (2, 3)
    assert torch.equal(out.cpu(), torch.ones(2, 3, dtype=torch.long))
    assert torch.empty(4, device="tpu", dtype=torch.half).exponential_().dtype == torch.half
