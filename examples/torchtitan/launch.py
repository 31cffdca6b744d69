"""TorchTitan 0.3.0's trainer on "tpu" under torch 2.13.0 (torchrun ... launch.py --module llama3 ...).

TorchTitan 0.3.0 is written for a newer torch. With `--parallelism.spmd-backend partial_dtensor`
it trains on tpu once three things torch 2.13 lacks or refuses are mended here, before it starts:

- torch 2.13's inductor claims the device name "tpu" for its own Pallas code generator, so the
  `torch.compile` TorchTitan applies to flex attention and its block masks would need JAX's
  inductor path: they are compiled with torchtpu's backend instead;
- flex attention accepts only CUDA, CPU, HPU and MPS inputs (`_validate_device`): tpu inputs run
  its dense path, on the device;
- `torch.distributed.set_timeout` is newer than torch 2.13, which has `_set_pg_timeout`.

Its default `spmd_types` backend cannot run on torch 2.13: it needs `fully_shard` to turn
annotated plain tensors into DTensors, which torch 2.13's FSDP2 does not do.
"""

import torch
import torch.distributed as dist
import torch.nn.attention.flex_attention as flex

import torchtpu  # noqa: F401  (before torchtitan, which picks its device type on import)

_validate_device = flex._validate_device


def _accept_tpu(query, key, value):
    if query.device.type != "tpu":
        _validate_device(query, key, value)


flex._validate_device = _accept_tpu
if not hasattr(dist, "set_timeout"):
    from torch.distributed.distributed_c10d import _set_pg_timeout

    dist.set_timeout = _set_pg_timeout

import torchtitan.models.common.attention as attention  # noqa: E402
from torchtitan.train import main  # noqa: E402

from torchtpu._compile import backend  # noqa: E402

attention._compiled_create_block_mask = torch.compile(flex.create_block_mask, backend=backend)
attention.FlexAttention._compiled_flex_attn = torch.compile(flex.flex_attention, backend=backend)

if __name__ == "__main__":
    main()
