"""Shape buckets for compiled graphs (torchtpu/_buckets.py): a graph over a dimension whose size
varies runs one program per bucket of sizes, with the results of the exact sizes (PyTorch on the
CPU as reference) for reductions, softmax, layer norm, causal attention, cross-entropy with
ignored targets, views merging the varying dimension, and gradients; graphs it cannot keep exact
compile per size as before."""

import io
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from conftest import run_python

import torchtpu
from torchtpu import _buckets

LENGTHS = [3, 5, 11, 8, 17, 2, 30]


@pytest.fixture(autouse=True)
def fresh():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def stats():
    m = torchtpu.metrics()
    return m["compiled_bucketed_calls"], m["compiled_captures"]


def check(fn, make, lengths=LENGTHS, bucketed=True, atol=1e-5):
    """fn compiled on tpu over inputs make(n) of each length, against fn on the CPU."""
    compiled = torch.compile(fn, backend="tpu")
    calls, _ = stats()
    eager = torchtpu.metrics()["compiled_eager_runs"]
    for n in lengths:
        inputs = make(n)
        on_tpu = [t.to("tpu") for t in inputs]  # before fn may write the CPU inputs
        want = fn(*inputs)
        got = compiled(*on_tpu)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype, (n, g.shape, w.shape)
            assert g.is_contiguous() == w.is_contiguous(), n
            torch.testing.assert_close(g.cpu(), w, atol=atol, rtol=1e-5, equal_nan=True,
                                       msg=lambda m: f"length {n}: {m}")
    assert torchtpu.metrics()["compiled_eager_runs"] == eager, "a graph ran eagerly"
    ran = stats()[0] - calls
    if bucketed:
        assert ran >= len(lengths) - 1, f"{ran} bucketed calls for {len(lengths)} lengths"
    else:
        assert ran == 0


def rows(n, b=2, h=6, seed=0):
    return torch.randn(b, n, h, generator=torch.Generator().manual_seed(seed + n))


def test_the_ladder():
    assert [_buckets.bucket(n, 2.0) for n in (1, 8, 9, 16, 17, 100, 512)] == [
        8, 8, 16, 16, 32, 128, 512]
    assert len({_buckets.bucket(n, 2.0) for n in range(1, 513)}) == 7
    assert _buckets.bucket(5, 2.0, bound=40, marked=True) == 40  # mark_dynamic's max
    assert _buckets.bucket(5, 2.0, bound=40) == 8  # a guard's bound caps the ladder
    assert _buckets.bucket(33, 2.0, bound=40) == 40
    assert _buckets.bucket(9, 1.5) == 12


@pytest.mark.parametrize("value", ["1", "-2", "x"])
def test_a_bad_ladder_says_so(monkeypatch, value):
    monkeypatch.setenv("TORCHTPU_SHAPE_BUCKETS", value)
    with pytest.raises(ValueError, match="TORCHTPU_SHAPE_BUCKETS"):
        _buckets.factor()


REDUCTIONS = {
    "sum": lambda x: x.sum(1),
    "sum_all": lambda x: x.sum(),
    "mean": lambda x: x.mean(1),
    "mean_keepdim": lambda x: x.mean((0, 1), keepdim=True),
    "amax": lambda x: x.amax(1),
    "amin": lambda x: -x.amin(1),
    "softmax": lambda x: x.softmax(1),
    "log_softmax": lambda x: torch.log_softmax(x, 1),
    "gram": lambda x: x.transpose(1, 2) @ x,
    "cumsum": lambda x: x.cumsum(1),
    "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "merged_view": lambda x: x.reshape(-1, x.shape[-1]).sum(0),
    "merged_then_split": lambda x: (x.reshape(-1, x.shape[-1]) * 2).view(x.shape).sum(1),
    "non_leading_output": lambda x: x * 2 + 1,
    "prod": lambda x: (x.abs() + 0.5).prod(1),
    # an output of two varying dimensions, compacted: n * n elements at the bucket's n
    "pairs": lambda x: x @ x.transpose(1, 2),
    # cats along the varying dimension: each part's valid elements after the last one's
    "cat_twice": lambda x: torch.cat([x, x], 1).cumsum(1),
    "cat_fixed_after": lambda x: torch.cat([x, x[:, :1] * 3], 1).softmax(1),
    "cat_fixed_between": lambda x: torch.cat([x, x.new_ones(2, 2, 6), x * 2], 1).cumsum(1),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_over_the_varying_dimension(name):
    check(REDUCTIONS[name], lambda n: (rows(n),))


def test_nan_and_inf_stay_where_they_are():
    def make(n):
        x = rows(n)
        x[0, n // 2, 1] = float("nan")
        x[1, 0, 2] = float("inf")
        return (x,)
    check(lambda x: (x.amax(1), x.sum(1), x.softmax(1), torch.cat([x, x * 2], 1).cumsum(1)),
          make)


def test_cross_entropy_with_ignored_targets():
    def make(n):
        g = torch.Generator().manual_seed(n)
        logits = torch.randn(2, n, 7, generator=g)
        target = torch.randint(0, 7, (2, n), generator=g)
        target[0, 0] = -100
        return logits, target
    check(lambda x, t: F.cross_entropy(x.view(-1, 7), t.view(-1)), make)


class Block(nn.Module):
    """Embedding, causal self-attention, layer norm, an MLP, a vocabulary head and the loss."""

    def __init__(self, vocab=40, width=16, heads=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.ln = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 32), nn.GELU(), nn.Linear(32, width))
        self.head = nn.Linear(width, vocab)
        self.heads = heads

    def forward(self, idx, targets):
        b, n = idx.shape
        x = self.emb(idx)
        q, k, v = self.qkv(self.ln(x)).split(x.shape[-1], dim=-1)
        q, k, v = [t.view(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v)]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        causal = torch.ones(n, n, dtype=torch.bool, device=idx.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, -1))
        x = x + self.mlp(x)
        logits = self.head(x)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        return loss, logits


def test_a_transformer_step_over_varying_lengths_equals_the_cpu():
    torch.manual_seed(0)
    cpu = Block()
    tpu = Block()
    tpu.load_state_dict(cpu.state_dict())
    tpu = tpu.to("tpu")
    step = torch.compile(tpu, backend="tpu")
    calls, captures = stats()
    for n in LENGTHS:
        g = torch.Generator().manual_seed(n)
        idx, targets = torch.randint(0, 40, (2, n), generator=g), torch.randint(0, 40, (2, n),
                                                                                 generator=g)
        loss, logits = cpu(idx, targets)
        (loss + logits.square().mean()).backward()
        got_loss, got_logits = step(idx.to("tpu"), targets.to("tpu"))
        (got_loss + got_logits.square().mean()).backward()
        assert got_logits.is_contiguous() and got_logits.shape == logits.shape
        torch.testing.assert_close(got_loss.cpu(), loss, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got_logits.cpu(), logits, atol=1e-5, rtol=1e-5)
        for (name, p), q in zip(tpu.named_parameters(), cpu.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, atol=3e-5, rtol=1e-4,
                                       msg=lambda m: f"length {n}, {name}.grad: {m}")
            p.grad, q.grad = None, None
    calls, captures = stats()[0] - calls, stats()[1] - captures
    # the first length compiles exactly (Dynamo sees one size); the others, in the buckets
    # 8, 16 and 32, run the forward and the backward graph bucketed
    assert calls == 2 * (len(LENGTHS) - 1)
    assert captures == 2 + 2 * 3


def test_lengths_1_to_64_capture_one_program_per_bucket():
    f = torch.compile(lambda x: x.softmax(1).sum(1) + x.mean(1), backend="tpu")
    _, captures = stats()
    for n in range(1, 65):
        x = torch.randn(2, n, 4)
        torch.testing.assert_close(f(x.to("tpu")).cpu(), x.softmax(1).sum(1) + x.mean(1))
    # length 1 specializes, 2 exactly; then the buckets 8, 16, 32, 64
    assert stats()[1] - captures <= 2 + 4


def test_mark_dynamic_with_a_max_compiles_one_program():
    f = torch.compile(lambda x: x.softmax(0) * x.sum(0), backend="tpu")
    _, captures = stats()
    for n in (5, 9, 30, 48):
        x = torch.randn(n, 3)
        t = x.to("tpu")
        torch._dynamo.mark_dynamic(t, 0, min=2, max=48)
        torch.testing.assert_close(f(t).cpu(), x.softmax(0) * x.sum(0))
    assert stats()[1] - captures == 1


def test_mark_dynamic_with_a_max_gives_the_backward_one_program_too():
    """The backward, compiled at its first call outside Dynamo's tracing, pads to the same max."""
    w = torch.randn(3, 4)

    def loss(x, w):
        return (x @ w).softmax(0).square().sum()

    f = torch.compile(loss, backend="tpu")
    _, captures = stats()
    for n in (5, 20, 37):
        x = torch.randn(n, 3, generator=torch.Generator().manual_seed(n))
        want_w = w.clone().requires_grad_()
        loss(x, want_w).backward()
        got_w = w.to("tpu").requires_grad_()
        t = x.to("tpu")
        torch._dynamo.mark_dynamic(t, 0, min=2, max=40)
        f(t, got_w).backward()
        torch.testing.assert_close(got_w.grad.cpu(), want_w.grad, atol=1e-5, rtol=1e-5)
    assert stats()[1] - captures == 2  # the forward and the backward, at 40 rows


def test_a_bound_from_slicing_a_buffer_caps_the_ladder():
    """Slicing a 40-row table by the length bounds it by 40: sizes still take the ladder's buckets
    (8, 16, 32), not one program at 40 for every size; past 32, the bucket is the bound."""
    table = torch.randn(40, 3)
    on_tpu = table.to("tpu")

    def fn(x, t):
        return (x + t[: x.shape[0]]).softmax(0).sum(0)

    f = torch.compile(fn, backend="tpu")
    _, captures = stats()
    for n in (3, 5, 7, 11, 30, 33, 40):
        x = torch.randn(n, 3, generator=torch.Generator().manual_seed(n))
        torch.testing.assert_close(f(x.to("tpu"), on_tpu).cpu(), fn(x, table))
    # 3 exactly; then the buckets 8 (5, 7), 16 (11), 32 (30) and 40 (33, 40)
    assert stats()[1] - captures == 5


@pytest.mark.parametrize("name, fn", [
    ("var", lambda x: x.var(1)),
    ("flip", lambda x: x.flip(1).sum(1)),
])
def test_graphs_it_cannot_keep_exact_compile_per_size(name, fn):
    check(fn, lambda n: (rows(n),), lengths=[3, 5, 9], bucketed=False)
    # explain_compiles() names the graph and why it is not in buckets
    out = io.StringIO()
    torchtpu.explain_compiles(file=out)
    text = out.getvalue()
    assert "compile per size, not in shape buckets" in text, text
    assert f"{name} on a dynamic size" in text, text


def test_a_cat_of_two_varying_sizes():
    check(lambda x, y: torch.cat([y, x, y], 1).cumsum(1),
          lambda n: (rows(n), rows(n // 2 + 1, seed=1)))


def test_a_growing_cache_fed_back_compiles_a_few_programs_per_bucket():
    """A KV cache grown by one position per call and fed back (transformers' DynamicCache): the
    returned cache, contiguous at its true length in a storage as long as the bucket, comes back
    as an input whose heads are laid out at that length; the graph takes it as it is and moves
    its elements to their places at the bucket's length (a gather), instead of a program per
    length."""
    def step(cache, new, q):
        cache = torch.cat([cache, new], dim=2)
        att = (q @ cache.transpose(-2, -1)).softmax(-1) @ cache
        return cache, att

    f = torch.compile(step, backend="tpu")
    g = torch.Generator().manual_seed(0)
    cache = torch.randn(1, 2, 3, 8, generator=g)
    on_tpu = cache.to("tpu")
    lengths = []
    for _ in range(40):
        new, q = torch.randn(1, 2, 1, 8, generator=g), torch.randn(1, 2, 1, 8, generator=g)
        before = stats()[1]
        cache, want = step(cache, new, q)
        on_tpu, got = f(on_tpu, new.to("tpu"), q.to("tpu"))
        lengths.append((cache.shape[2], stats()[1] - before))
        assert got.shape == want.shape and on_tpu.is_contiguous()
        torch.testing.assert_close(on_tpu.cpu(), cache)
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
    # the first two lengths exactly, then at most two programs in each bucket: its first
    # length, whose input the pad copies, and the others, spread
    per_bucket = {}
    for n, captured in lengths[2:]:
        b = _buckets.bucket(n - 1, 2.0)
        per_bucket[b] = per_bucket.get(b, 0) + captured
    assert per_bucket and all(c <= 2 for c in per_bucket.values()), per_bucket


def test_a_graph_writing_its_varying_input_compiles_per_size():
    def f(x):
        x.mul_(2)
        return x.sum(1)
    f_tpu = torch.compile(f, backend="tpu")
    graphs = torchtpu.metrics()["compiled_bucketed_graphs"]
    for n in (3, 5, 9):
        x = rows(n)
        t = x.to("tpu")
        torch.testing.assert_close(f_tpu(t).cpu(), f(x))
        torch.testing.assert_close(t.cpu(), x)
    assert torchtpu.metrics()["compiled_bucketed_graphs"] == graphs


def test_attention_with_infinite_values():
    def f(q, v):
        att = (q @ q.transpose(1, 2)).softmax(-1)
        return att @ v, att.sum(1)

    def make(n):
        q, v = rows(n, h=4), rows(n, h=4, seed=7)
        v[0, -1, 0] = float("inf")
        return q, v
    check(f, make)


def test_sizes_used_as_positions_or_values():
    w = torch.arange(64.0, device="tpu")
    freqs = torch.randn(64, 6).to("tpu")

    def last_of_w(x):
        return x.sum(1) + w.to(x.device)[x.shape[1] - 1]  # w's row n-1

    def shifted_range(x):
        return x.sum(-1) + torch.arange(x.shape[1], x.shape[1] + 6, device=x.device).sum()

    def pow_by_size(x):
        return x.abs().pow(1.0 / x.shape[1]).sum(1)

    def full_by_size(x):
        return (x + torch.full_like(x, 1.0 / x.shape[1])).sum(1)

    def rows_of_freqs(x):
        return x * freqs.to(x.device)[: x.shape[1]]
    for fn in (last_of_w, shifted_range, pow_by_size, full_by_size):
        torch._dynamo.reset()
        check(fn, lambda n: (rows(n),), lengths=[3, 5, 9], bucketed=False)
    torch._dynamo.reset()
    check(rows_of_freqs, lambda n: (rows(n),), lengths=[3, 5, 9])  # a slice's end: a size


def test_indices_and_divisors_in_the_padding_are_made_valid():
    table = torch.randn(20, 3).to("tpu")

    def embed(x, t):
        return (x.sum(-1, keepdim=True) * F.embedding(t - 1, table.to(x.device))).sum(1)

    def by_position(x, t):  # positions 17..31 of bucket 32 are past the table's 20 rows
        positions = torch.arange(x.shape[1], device=x.device)
        return (x.sum(-1, keepdim=True) * F.embedding(positions, table.to(x.device))).sum(1)

    def divide(x, t):
        return (x.sum(-1).long() // t).sum(1)

    def make(n):
        return rows(n), torch.randint(1, 17, (2, n), generator=torch.Generator().manual_seed(n))
    for fn in (embed, divide, by_position):
        torch._dynamo.reset()
        check(fn, make, lengths=[3, 5, 9, 17])


def test_writes_at_a_varying_number_of_positions():
    """index_put, index_copy and a setitem writing n rows into a fixed-size tensor (a static KV
    cache written at a prompt's positions, in place included): the padding writes the first
    valid row's value at its position again, so every length of a bucket shares its program."""
    def put(cache, pos, vals):
        return cache.index_put((pos,), vals) * 1.0

    def copy(cache, pos, vals):
        return cache.index_copy(0, pos, vals) + 0

    def setitem_columns(cache, pos, vals):  # the positions index dimension 1; values broadcast
        c = cache.clone()
        c[:, pos] = vals[:, :1].T
        return c

    def make(n):
        g = torch.Generator().manual_seed(n)
        pos = torch.randperm(40, generator=g)[:n]  # any order, never position 0 first
        return torch.randn(40, 4, generator=g), pos, torch.randn(n, 4, generator=g)

    for fn in (put, copy):
        torch._dynamo.reset()
        check(fn, make, lengths=[3, 5, 9, 17, 30])
    torch._dynamo.reset()
    check(setitem_columns, lambda n: (make(n)[0].T.contiguous(), *make(n)[1:]),
          lengths=[3, 5, 9, 17, 30])

    def prefill(k_cache, v_cache, pos, q, k, v):
        k_cache.index_copy_(0, pos, k)
        v_cache[pos] = v
        n = q.shape[0]
        return (q @ k_cache[:n].T).softmax(-1) @ v_cache[:n]

    f = torch.compile(prefill, backend="tpu")
    torch._dynamo.reset()
    calls, _ = stats()
    for n in (3, 5, 9, 17, 30):
        g = torch.Generator().manual_seed(n)
        caches = [torch.randn(40, 4, generator=g) for _ in range(2)]
        q, k, v = [torch.randn(n, 4, generator=g) for _ in range(3)]
        on_tpu = [c.to("tpu") for c in caches]
        got = f(*on_tpu, torch.arange(n).to("tpu"), q.to("tpu"), k.to("tpu"), v.to("tpu"))
        want = prefill(*caches, torch.arange(n), q, k, v)
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)
        for c, w in zip(on_tpu, caches):
            assert torch.equal(c.cpu(), w), n
    assert stats()[0] - calls == 4


def test_writes_into_a_varying_dimension():
    """index_put along the varying dimension: a negative index counts from the true size, and one
    past it raises as PyTorch does; a scatter across positions still compiles per size."""
    def put(x, idx):
        y = x.clone()
        y[:, idx] = 0
        return y.sum(1)

    def scatter_across(x):
        index = torch.zeros(2, x.shape[1], dtype=torch.long, device=x.device)
        return torch.zeros(2, 64, device=x.device).scatter_add(1, index, x[..., 0]) + 0
    torch._dynamo.reset()
    check(put, lambda n: (rows(n), torch.tensor([0, -1, -n])), lengths=[3, 5, 9, 17])
    f = torch.compile(put, backend="tpu")
    for n in (5, 6):  # in the bucket 8, as the check above left it
        for bad in (n, -n - 1, -n - 8):  # past the true size, and before it from the end
            with pytest.raises(IndexError):
                put(rows(n), torch.tensor([bad]))
            with pytest.raises((IndexError, RuntimeError), match="out of"):
                f(rows(n).to("tpu"), torch.tensor([bad]).to("tpu")).cpu()
    torch._dynamo.reset()
    check(scatter_across, lambda n: (rows(n),), lengths=[3, 5, 9], bucketed=False)

    def by_mask(x):  # a boolean mask's index_put keeps a graph per size
        y = x.clone()
        y[y > 0] = 0.0
        return y
    torch._dynamo.reset()
    check(by_mask, lambda n: (rows(n)[0, :, 0],), lengths=[3, 5, 9, 10], bucketed=False)


def test_the_last_elements_of_a_varying_dimension():
    """x[:, -k:] and x[:, -1] (a language model's logits of the last token) are taken at the
    true size."""
    for fn in (lambda x: x[:, -2:].sum(1), lambda x: x[:, -1] * 2, lambda x: x[:, -1:, :] + 1):
        torch._dynamo.reset()
        check(fn, lambda n: (rows(n),), lengths=[3, 5, 9, 17])


def test_an_input_transposed_in_place_keeps_its_layout():
    def f(x):
        x.transpose_(1, 2)
        return x.sum(-1)
    compiled = torch.compile(f, backend="tpu")
    for n in (3, 5, 9):
        x = rows(n)
        t = x.to("tpu")
        torch.testing.assert_close(compiled(t).cpu(), f(x))
        assert t.shape == x.shape and t.stride() == x.stride()
        torch.testing.assert_close(t.cpu(), x)


def test_random_ops_compile_per_size():
    f = torch.compile(lambda x: F.dropout(x, 0.5).sum(1), backend="tpu")
    graphs = torchtpu.metrics()["compiled_bucketed_graphs"]
    for n in (3, 5, 9):
        assert f(torch.ones(2, n, device="tpu")).shape == (2,)
    assert torchtpu.metrics()["compiled_bucketed_graphs"] == graphs


def test_buckets_off():
    done = run_python("""
        import torch, torchtpu
        f = torch.compile(lambda x: x.sum(1), backend="tpu")
        for n in (3, 5, 9):
            f(torch.ones(2, n, device="tpu")).cpu()
        m = torchtpu.metrics()
        print(m["compiled_bucketed_graphs"], m["compiled_captures"])
        """, TORCHTPU_SHAPE_BUCKETS="0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == ["0", "3"]


def test_a_step_over_lengths_in_one_bucket_compiles_no_program_per_length():
    """Within a bucket nothing compiles per length: not the graphs, and not the zeros autograd
    fills in for the unused logits' gradient (a fill made on the host from its third shape on)."""
    torch.manual_seed(0)
    model = Block().to("tpu")
    step = torch.compile(model, backend="tpu")

    def run(n):
        idx = torch.randint(0, 40, (2, n), generator=torch.Generator().manual_seed(n)).to("tpu")
        loss, _ = step(idx, idx)
        loss.backward()
        model.zero_grad(set_to_none=True)
        return loss.item()

    for n in (3, 5, 17, 20):  # exact, then the buckets 8 and 32
        run(n)
    before = torchtpu.metrics()["executables_compiled"]
    for n in (23, 26, 29, 32):
        run(n)
    assert torchtpu.metrics()["executables_compiled"] == before


def test_an_index_out_of_range_in_the_valid_part_still_raises():
    """Only the padding's indices are made valid: a bad index among the true elements raises the
    device's IndexError, in a bucketed graph as eagerly; the next call runs as before."""
    table = torch.randn(20, 3)
    on_tpu = table.to("tpu")

    def embed(x, t, table):
        return (x.sum(-1, keepdim=True) * F.embedding(t, table)).sum(1)

    f = torch.compile(embed, backend="tpu")
    calls, _ = stats()
    eager = torchtpu.metrics()["compiled_eager_runs"]
    for n in (3, 5, 6, 7):  # 5, 6 and 7 run bucketed, in the bucket 8
        x = rows(n)
        t = torch.randint(0, 20, (2, n), generator=torch.Generator().manual_seed(n))
        if n == 6:
            t[1, n - 1] = 20  # the last valid element
            with pytest.raises(IndexError, match="index out of range"):
                f(x.to("tpu"), t.to("tpu"), on_tpu).cpu()
            continue
        torch.testing.assert_close(f(x.to("tpu"), t.to("tpu"), on_tpu).cpu(), embed(x, t, table))
    assert stats()[0] - calls == 3
    assert torchtpu.metrics()["compiled_eager_runs"] == eager


def test_an_index_past_the_true_size_of_a_varying_dimension_still_raises():
    """index_select and gather along the varying dimension: an index at or past the true size
    would read the padding at the bucket's size; it raises as PyTorch does, and the valid ones
    give the CPU's values."""
    def select(x, idx):
        return x.index_select(1, idx).sum(1)

    def gather(x, idx):
        return torch.gather(x, 1, idx).sum(1)

    for fn, index in ((select, lambda last: torch.tensor([0, last])),
                      (gather, lambda last: torch.full((2, 1, 6), last))):
        torch._dynamo.reset()
        f = torch.compile(fn, backend="tpu")
        calls, _ = stats()
        for n in (3, 5, 6, 7):  # 5, 6 and 7 in the bucket 8
            x = rows(n)
            torch.testing.assert_close(f(x.to("tpu"), index(n - 1).to("tpu")).cpu(),
                                       fn(x, index(n - 1)))
            with pytest.raises(RuntimeError, match="out of"):
                fn(x, index(n))
            with pytest.raises(RuntimeError, match="out of"):
                f(x.to("tpu"), index(n).to("tpu")).cpu()
        assert stats()[0] - calls >= 3, fn.__name__


def test_an_integer_that_is_no_tensor_size():
    """An integer argument that varies becomes a size of its own (a cache sized by it, as
    generate() sizes a static KV cache) or a value, given its true value."""
    def sized_by(x, k):
        cache = torch.ones(k, x.shape[1], device=x.device)
        return (cache.sum(0) + x.sum(0)) * k + x.mean(0)

    def plus(x, k):
        return (x + k).sum(0)

    for fn in (sized_by, plus):
        torch._dynamo.reset()
        f = torch.compile(fn, backend="tpu")
        calls, _ = stats()
        for n, k in ((3, 4), (5, 9), (6, 11), (7, 20), (9, 13)):
            x = rows(n)[0]
            torch.testing.assert_close(f(x.to("tpu"), k).cpu(), fn(x, k), atol=1e-4, rtol=1e-5)
        assert stats()[0] - calls >= 3, fn.__name__


def test_a_size_given_as_a_number_keeps_the_result_type():
    """A size added to a 0-d int32 tensor, or compared with a half tensor, gives the type a
    Python int would (int32, bool), not that of the int64 true size."""
    def to_zero_d(x, c):
        return x.sum(0) * (c + x.shape[0]), c + x.shape[0]

    def compared(x):
        return (x.half() < x.shape[0]).sum(0), x.to(torch.int32) + x.shape[0]

    torch._dynamo.reset()
    check(to_zero_d, lambda n: (rows(n)[0] * 4, torch.tensor(3, dtype=torch.int32)),
          lengths=[3, 5, 6, 9])
    torch._dynamo.reset()
    check(compared, lambda n: (rows(n)[0] * 4,), lengths=[3, 5, 6, 9])

    def scaled(x):  # the exact size, as PyTorch computes it, not the size rounded to bfloat16
        return x * x.shape[0], x / x.shape[0]
    torch._dynamo.reset()
    check(scaled, lambda n: (torch.full((n,), 3.0, dtype=torch.bfloat16),),
          lengths=[200, 257, 300, 385], atol=0)
