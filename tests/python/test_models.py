"""Models people run, small and with random weights (no downloads): a ResNet-18-style and a
MobileNetV3-style CNN defined here, and Hugging Face transformers' GPT-2, Llama, BERT and T5 built
from configs. Forward, one AdamW step and (for the language models) greedy generate() match the
CPU in each eager mode and compiled, with every op on the device (TORCHTPU_CPU_FALLBACK=error)."""

import copy
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import torchtpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

MODES = ["strict", "debug", "defer_and_fuse", "compile"]
# Every model runs in DeferAndFuse (the default). Compiled: all but MobileNet and BERT (a CNN and
# an encoder like others there). Strict, whose per-op programs test_opinfo.py checks op by op,
# runs one CNN and two transformers (a decoder and an encoder-decoder); Debug, Strict's programs
# with checks after each op, one CNN and one transformer.
IN_MODE = {"strict": {"resnet", "gpt2", "t5"}, "debug": {"resnet", "gpt2"},
           "compile": {"resnet", "gpt2", "llama", "t5"}}
VOCAB = 64
LR = 1e-3


class BasicBlock(nn.Module):
    """ResNet's block: two 3x3 convolutions with batch norm, a projection when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """ResNet-18's layout (stem, max pool, 4 stages of 2 blocks, global average pool), narrow."""

    def __init__(self, width=8, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], width
        for n, cout in enumerate([width, 2 * width, 4 * width, 8 * width]):
            blocks += [BasicBlock(cin, cout, 1 if n == 0 else 2), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.head(torch.flatten(x, 1))


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.reduce, self.expand = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1)

    def forward(self, x):
        s = nn.functional.adaptive_avg_pool2d(x, 1)
        return x * nn.functional.hardsigmoid(self.expand(torch.relu(self.reduce(s))))


class InvertedResidual(nn.Module):
    """MobileNetV3's block: expand 1x1, depthwise kxk, squeeze-excite, project 1x1."""

    def __init__(self, cin, hidden, cout, kernel, stride, se):
        super().__init__()
        layers = [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.Hardswish(),
                  nn.Conv2d(hidden, hidden, kernel, stride, kernel // 2, groups=hidden,
                            bias=False), nn.BatchNorm2d(hidden), nn.Hardswish()]
        if se:
            layers.append(SqueezeExcite(hidden))
        layers += [nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV3(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8),
                                  nn.Hardswish())
        self.blocks = nn.Sequential(InvertedResidual(8, 16, 8, 3, 1, True),
                                    InvertedResidual(8, 24, 12, 5, 2, False),
                                    InvertedResidual(12, 36, 12, 3, 1, True))
        self.head = nn.Sequential(nn.Linear(12, 32), nn.Hardswish(), nn.Dropout(0.0),
                                  nn.Linear(32, classes))

    def forward(self, x):
        x = nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1)
        return self.head(torch.flatten(x, 1))


def _hf(name):
    t = transformers
    if name == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config(
            n_layer=2, n_head=2, n_embd=32, vocab_size=VOCAB, n_positions=32, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=1, pad_token_id=1))
    if name == "llama":
        return t.LlamaForCausalLM(t.LlamaConfig(
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
            intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=32, bos_token_id=0,
            eos_token_id=1, pad_token_id=1))
    if name == "mistral":  # a sliding window of 4 tokens
        return t.MistralForCausalLM(t.MistralConfig(
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
            intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=32, sliding_window=4,
            bos_token_id=0, eos_token_id=1, pad_token_id=1))
    if name == "bert":
        return t.BertForMaskedLM(t.BertConfig(
            num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
            vocab_size=VOCAB, max_position_embeddings=32, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0))
    return t.T5ForConditionalGeneration(t.T5Config(
        num_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=VOCAB,
        dropout_rate=0.0, decoder_start_token_id=0, eos_token_id=1, pad_token_id=1))


def _inputs(name):
    """(model inputs, a loss of the model's output); the same random values on every call."""
    g = torch.Generator().manual_seed(1)
    if name in ("resnet", "mobilenet"):
        # 4 images of 64x64: the last stage's batch norms see 16 values per channel. (Two images
        # of 32x32 left them 2, where normalizing two near-equal values turns float32 rounding
        # into errors of 1e-3: a machine's vector width decided whether the test passed.)
        images, labels = torch.randn(4, 3, 64, 64, generator=g), torch.tensor([3, 7, 1, 0])
        return (images,), {}, lambda out, dev: nn.functional.cross_entropy(out, labels.to(dev))
    ids = torch.randint(2, VOCAB, (2, 8), generator=g)
    kwargs = {"labels": ids}
    if name == "t5":
        kwargs["decoder_input_ids"] = ids[:, :5].contiguous()
        kwargs["labels"] = ids[:, 1:6].contiguous()
    return (ids,), kwargs, lambda out, dev: out.loss


def _model(name):
    torch.manual_seed(0)
    model = {"resnet": ResNet, "mobilenet": MobileNetV3}.get(name, lambda: _hf(name))()
    return model.train()


def _moved(value, device):
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _step(name, model, device, compile):
    """Forward and one AdamW step on `device`: (output, loss, gradients, weights after it)."""
    args, kwargs, loss_of = _inputs(name)
    args = [_moved(a, device) for a in args]
    kwargs = {k: _moved(v, device) for k, v in kwargs.items()}
    forward = torch.compile(model, backend="tpu", dynamic=False) if compile else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR)
    out = forward(*args, **kwargs)
    loss = loss_of(out, device)
    loss.backward()
    grads = [p.grad.detach().cpu() for p in model.parameters()]
    optimizer.step()
    logits = out if isinstance(out, torch.Tensor) else out.logits
    return (logits.detach().cpu(), loss.detach().cpu(), grads,
            [p.detach().cpu() for p in model.parameters()])


def _in_mode(mode):
    return torchtpu.eager_mode("strict" if mode == "compile" else mode)


def _cases(names):
    return [(name, mode) for name in names for mode in MODES if name in IN_MODE.get(mode, names)]


@pytest.mark.parametrize("name, mode",
                         _cases(["resnet", "mobilenet", "gpt2", "llama", "bert", "t5"]))
def test_forward_and_adamw_step_match_cpu(name, mode, fallback_error):
    cpu_model = _model(name)
    tpu_model = copy.deepcopy(cpu_model).to("tpu")
    cpu_logits, cpu_loss, cpu_grads, cpu_params = _step(name, cpu_model, "cpu", compile=False)
    with _in_mode(mode):
        logits, loss, grads, params = _step(name, tpu_model, "tpu", compile=mode == "compile")
    torch.testing.assert_close(logits, cpu_logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(loss, cpu_loss, rtol=1e-4, atol=1e-4)
    # Gradients to within 0.2 % of each one's largest entry: the CNNs' batch norms over 2 images
    # of 1x1 pixels in their last stage amplify float32 rounding on the way back (both devices).
    atols = [1e-5 + 2e-3 * float(c.abs().max()) for c in cpu_grads]
    for g, c, atol in zip(grads, cpu_grads, atols, strict=True):
        torch.testing.assert_close(g, c, rtol=1e-3, atol=atol)
    # AdamW's first step moves each weight by lr * sign(grad), so a gradient that is zero within
    # that tolerance (a bias followed by a batch norm is zero up to rounding) may move its weight
    # either way: those may differ by 2 * lr, all others must agree.
    for p, c, g, atol in zip(params, cpu_params, cpu_grads, atols, strict=True):
        tiny = g.abs() <= atol
        torch.testing.assert_close(p[~tiny], c[~tiny], rtol=1e-4, atol=1e-5)
        assert bool(((p[tiny] - c[tiny]).abs() <= 2.1 * LR).all())


def _greedy_generate(name, mode, ids, **options):
    """Greedy generate() of model `name` on the CPU, and a function running it on tpu in `mode`."""
    model = _model(name).eval()
    options = {"do_sample": False, "attention_mask": torch.ones_like(ids), **options}
    expected = model.generate(ids, **options)
    model.to("tpu")
    if mode == "compile":
        model.forward = torch.compile(model.forward, backend="tpu", dynamic=False)
    options["attention_mask"] = options["attention_mask"].to("tpu")

    def on_tpu(**more):
        with _in_mode(mode):
            return model.generate(ids.to("tpu"), **{**options, **more})

    return expected, on_tpu


@pytest.mark.parametrize("name, mode", _cases(["gpt2", "llama", "t5"]))
def test_greedy_generate_matches_cpu(name, mode, fallback_error):
    ids = torch.randint(2, VOCAB, (2, 6), generator=torch.Generator().manual_seed(2))
    expected, on_tpu = _greedy_generate(name, mode, ids, max_new_tokens=4)
    got = on_tpu()
    assert got.device.type == "tpu"
    assert torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compile"])
def test_static_cache_generate_matches_cpu_and_repeats_without_compiling(mode, fallback_error):
    """generate() with transformers' static KV cache: the CPU's tokens, and a call repeating the
    earlier ones compiles no program (the first two also compile the setup's)."""
    ids = torch.randint(2, VOCAB, (1, 5), generator=torch.Generator().manual_seed(2))
    expected, on_tpu = _greedy_generate("llama", mode, ids, max_new_tokens=3,
                                        cache_implementation="static")
    for _ in range(3):
        before = torchtpu.metrics()["executable_cache_misses"]
        assert torch.equal(on_tpu().cpu(), expected)
    assert torchtpu.metrics()["executable_cache_misses"] == before


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compile"])
def test_static_cache_generate_of_new_lengths_compiles_nothing(mode, fallback_error, host_ops):
    """Past the first calls, generate() of more new tokens than ever before compiles no program:
    the ops on the sequence, positions and mask that grow by one each token run on the host once
    their line has seen two lengths (csrc/aten/host_ops.cc), and the model's own ops, over the
    static cache, keep their shapes."""
    ids = torch.randint(2, VOCAB, (1, 5), generator=torch.Generator().manual_seed(3))
    expected, on_tpu = _greedy_generate("llama", mode, ids, max_new_tokens=20,
                                        cache_implementation="static")
    for n in (3, 3, 8, 20):
        before = torchtpu.metrics()["executable_cache_misses"]
        got = on_tpu(max_new_tokens=n)
        assert torch.equal(got.cpu(), expected[:, :5 + n]), n
    assert torchtpu.metrics()["executable_cache_misses"] == before


def test_static_cache_prefill_of_varying_prompts_runs_in_buckets(fallback_error):
    """Compiled generate() with a static KV cache over prompts of several lengths: the prefill
    graph (its cache sized by prompt + new tokens, written at the prompt's positions, the last
    token's logits taken from the end) runs in shape buckets, with the CPU's tokens."""
    torch._dynamo.reset()
    cpu = _model("llama").eval()
    model = _model("llama").eval().to("tpu")
    model.load_state_dict(cpu.state_dict())
    model.forward = torch.compile(model.forward, backend="tpu")
    options = {"do_sample": False, "cache_implementation": "static", "max_new_tokens": 3}
    before = torchtpu.metrics()["compiled_bucketed_calls"]
    with _in_mode("strict"):
        for n in (3, 4, 6, 9, 13):
            ids = torch.randint(2, VOCAB, (1, n), generator=torch.Generator().manual_seed(n))
            mask = torch.ones_like(ids)
            expected = cpu.generate(ids, attention_mask=mask, **options)
            got = model.generate(ids.to("tpu"), attention_mask=mask.to("tpu"), **options)
            assert torch.equal(got.cpu(), expected), n
    # the first prompt compiles exactly; every later one runs its prefill bucketed
    assert torchtpu.metrics()["compiled_bucketed_calls"] - before == 4
    torch._dynamo.reset()


def test_compiled_generate_with_max_cache_len_captures_its_graphs_once(fallback_error):
    """Calls asking for ever more new tokens: transformers makes a static cache per call, as long
    as the call needs, and the compiled forward would capture its graphs again for each (README,
    Varying shapes: buckets). With max_cache_len the cache has one length, so the first call's
    two graphs (prefill, decode) are replayed by every later call, with the CPU's tokens."""
    torch._dynamo.reset()
    cpu = _model("llama").eval()
    model = _model("llama").eval().to("tpu")
    model.load_state_dict(cpu.state_dict())
    model.forward = torch.compile(model.forward, backend="tpu", dynamic=False)
    ids = torch.randint(2, VOCAB, (1, 5), generator=torch.Generator().manual_seed(4))
    options = {"do_sample": False, "cache_implementation": "static", "max_cache_len": 40}
    expected = cpu.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=24, **options)
    mask = torch.ones_like(ids).to("tpu")
    with _in_mode("strict"):
        for i, n in enumerate((4, 8, 16, 24)):
            before = torchtpu.metrics()
            got = model.generate(ids.to("tpu"), attention_mask=mask, max_new_tokens=n, **options)
            after = torchtpu.metrics()
            assert torch.equal(got.cpu(), expected[:, :5 + n]), n
            if i > 0:
                assert after["compiled_captures"] == before["compiled_captures"], n
                assert after["compiled_replays"] - before["compiled_replays"] == n, n
    torch._dynamo.reset()


def test_compiled_generate_with_the_default_cache_runs_in_buckets(fallback_error):
    """generate() with transformers' default cache (DynamicCache, grown by a cat each token),
    its forward compiled with Dynamo's automatic dynamic shapes: the decoding graph runs in shape
    buckets, so a call over lengths already seen captures nothing and one reaching a new bucket
    two programs, with the CPU's tokens."""
    torch._dynamo.reset()
    cpu = _model("llama").eval()
    model = _model("llama").eval().to("tpu")
    model.load_state_dict(cpu.state_dict())
    model.forward = torch.compile(model.forward, backend="tpu")
    ids = torch.randint(2, VOCAB, (1, 5), generator=torch.Generator().manual_seed(5))
    options = {"do_sample": False}
    expected = cpu.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=40, **options)
    mask = torch.ones_like(ids).to("tpu")
    captures = []
    with _in_mode("strict"):
        for n in (12, 12, 40):
            before = torchtpu.metrics()
            got = model.generate(ids.to("tpu"), attention_mask=mask, max_new_tokens=n, **options)
            after = torchtpu.metrics()
            assert torch.equal(got.cpu(), expected[:, :5 + n]), n
            assert after["compiled_eager_runs"] == before["compiled_eager_runs"]
            captures.append(after["compiled_captures"] - before["compiled_captures"])
    # the second call repeats the first's lengths; the third's cache grows from 16 to 44, into
    # the buckets 32 and 64: at most two programs each
    assert captures[1] == 0 and 0 < captures[2] <= 4, captures
    torch._dynamo.reset()


def test_sliding_window_generate_compiled_replays_on_the_device(fallback_error):
    """A sliding-window model's compiled forward takes a 0-d CPU tensor (the window); it becomes
    a device argument, so the repeated call replays every graph instead of running it eagerly."""
    # Every model's forward here is one decorator's code (transformers' wrapped_func): the
    # generate tests before this one filled Dynamo's recompile limit for it (a graph per length),
    # past which Dynamo runs the frame as it is.
    torch._dynamo.reset()
    ids = torch.randint(2, VOCAB, (1, 6), generator=torch.Generator().manual_seed(2))
    expected, on_tpu = _greedy_generate("mistral", "compile", ids, max_new_tokens=6)
    assert torch.equal(on_tpu().cpu(), expected)
    before = torchtpu.metrics()
    assert torch.equal(on_tpu().cpu(), expected)
    after = torchtpu.metrics()
    assert after["compiled_eager_runs"] == before["compiled_eager_runs"]
    assert after["compiled_replays"] - before["compiled_replays"] == 6


def test_generate_example_runs():
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "generate.py")
    r = subprocess.run([sys.executable, example, "--tokens", "3,3,3"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if "new tokens" in line]
    assert len(lines) == 3 and all("equal to the CPU's" in line for line in lines), r.stdout
    assert " 0 programs compiled" in lines[-1], r.stdout
