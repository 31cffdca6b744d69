"""Greedy decoding with Hugging Face transformers' generate() on "tpu": a small Llama built from a
config (random weights, no downloads) and its static KV cache, eagerly and under torch.compile.

For each number of new tokens it prints tokens per second and the programs compiled by that call
(torchtpu.metrics()'s executable cache misses), and checks the tokens against greedy decoding on
the CPU:

    python examples/generate.py                          # the default eager mode
    python examples/generate.py --mode compile --tokens 8,8,8,16
    python examples/generate.py --cache dynamic          # transformers' default cache
    python examples/generate.py --mode compile --cache dynamic --tokens 8,8,16,32,32

From the third call on, a call compiles nothing, whatever its number of tokens (the first calls'
programs also hold the setup's ops): generate() lengthens the ids, positions and attention mask
by one at each token, and the small integer ops on them run on the host once their line has
compiled two lengths (TORCHTPU_HOST_OPS=0 compiles them per length instead). With the default
cache, the cache grows by one position each token: eagerly each new length compiles its
programs, while the compiled forward runs in shape buckets, so a call compiles only when its
lengths reach a bucket no call reached before.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

import torchtpu  # noqa: E402

MODES = ("defer_and_fuse", "strict", "debug", "compile")


def small_llama() -> transformers.LlamaForCausalLM:
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, max_position_embeddings=256)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=MODES, default=torchtpu.get_eager_mode())
    parser.add_argument("--cache", choices=("static", "dynamic"), default="static")
    parser.add_argument("--tokens", default="8,8,8,16", help="new tokens of each call, in order")
    parser.add_argument("--prompt", type=int, default=5, help="prompt length")
    args = parser.parse_args()

    model = small_llama()
    prompt = torch.randint(2, 64, (1, args.prompt), generator=torch.Generator().manual_seed(2))
    options = {"do_sample": False, "attention_mask": torch.ones_like(prompt)}
    lengths = [int(n) for n in args.tokens.split(",")]
    if args.cache == "static":
        # One cache length for every call: compiled, a new length captures the graphs again
        # (README, Varying shapes: buckets).
        options.update(cache_implementation="static", max_cache_len=args.prompt + max(lengths))
    expected = model.generate(prompt, max_new_tokens=max(lengths), **options)

    model.to("tpu")
    if args.mode == "compile":
        # the static cache keeps one length: no size varies; the default cache grows by one
        # each token, which Dynamo's automatic dynamic shapes trace as a size that runs in
        # shape buckets (README, Varying shapes: buckets)
        dynamic = False if args.cache == "static" else None
        model.forward = torch.compile(model.forward, backend="tpu", dynamic=dynamic)
    options["attention_mask"] = options["attention_mask"].to("tpu")
    print(f"{args.mode}, {args.cache} cache, prompt of {args.prompt} tokens "
          f"[{torch.tpu.get_device_name()}]")
    with torchtpu.eager_mode("strict" if args.mode == "compile" else args.mode):
        for n in lengths:
            before = torchtpu.metrics()["executable_cache_misses"]
            start = time.perf_counter()
            got = model.generate(prompt.to("tpu"), max_new_tokens=n, **options).cpu()
            seconds = time.perf_counter() - start
            compiled = torchtpu.metrics()["executable_cache_misses"] - before
            same = torch.equal(got, expected[:, :got.shape[1]])
            print(f"  {n:4} new tokens: {n / seconds:8.1f} tokens/s, {compiled:4} programs "
                  f"compiled, tokens {'equal to' if same else 'DIFFERENT from'} the CPU's")
            if not same:
                raise SystemExit(1)


if __name__ == "__main__":
    main()
