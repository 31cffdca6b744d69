"""A first look at the "tpu" device: tensors, arithmetic, views, in-place updates."""

import torch

import torchtpu

print(f"torchtpu {torchtpu.__version__}: 'tpu' is {torch.tpu.get_device_name()} "
      f"({torch.tpu.device_count()} device(s)), plugin {torchtpu.plugin()['path']}")

x = torch.arange(6.0).reshape(2, 3).to("tpu")
print("type(x) is torch.Tensor:", type(x) is torch.Tensor, "| device:", x.device)
print("x + x * 2 - 1 =\n", (x + x * 2 - 1).cpu())
print("zeros:", torch.zeros(3, device="tpu").cpu())
print("empty(2, 2).fill_(7):\n", torch.empty(2, 2, device="tpu").fill_(7).cpu())
y = x.t()
print("x.t() is a view, contiguous:", y.is_contiguous(), "\n", y.cpu())
x.add_(1)
print("after x.add_(1), the view sees it:\n", y.cpu())
x[:, 1].mul_(10)
print("after x[:, 1].mul_(10):\n", x.cpu())
print("integer division, floor mode:",
      torch.div(torch.tensor([-7, 7], device="tpu"), 2, rounding_mode="floor").cpu())
print("metrics:", torchtpu.metrics())
