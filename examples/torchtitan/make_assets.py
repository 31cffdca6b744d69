"""The data and tokenizer TorchTitan's llama3 debug config reads from ./tests/assets, made here
from examples/data/sonnets.txt (nothing downloaded): c4_test/data.json (JSON lines with a "text"
field, 14 lines of verse each) and a byte-level BPE tokenizer of 1024 tokens."""

import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"


def main(out="tests/assets"):
    with open(os.path.join(HERE, "..", "data", "sonnets.txt")) as f:
        lines = [line.strip() for line in f if line.strip()]
    texts = [" ".join(lines[i:i + 14]) for i in range(0, len(lines), 14)]
    os.makedirs(os.path.join(out, "c4_test"), exist_ok=True)
    os.makedirs(os.path.join(out, "tokenizer"), exist_ok=True)
    with open(os.path.join(out, "c4_test", "data.json"), "w") as f:
        f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=1024, special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer.save(os.path.join(out, "tokenizer", "tokenizer.json"))
    with open(os.path.join(out, "tokenizer", "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": True,
                   "add_eos_token": True}, f)


if __name__ == "__main__":
    main()
