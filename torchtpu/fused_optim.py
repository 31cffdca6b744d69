"""The fused Adam and AdamW steps (`torch.optim.Adam(..., fused=True)`, TorchTitan's default) on tpu.

PyTorch has these kernels for CPU and CUDA only; without one, each step would copy every parameter
and its state to the host and back. Here the step is the fused kernel's math in tensor ops (in
float32 for half-precision tensors, as the kernels compute), so it runs on the device: one program
per tensor in Strict, fused into the step's program in DeferAndFuse and under torch.compile.
"""

from __future__ import annotations

import torch

_LOW_PRECISION = (torch.float16, torch.bfloat16)


def _opmath(t: torch.Tensor) -> torch.Tensor:
    return t.float() if t.dtype in _LOW_PRECISION else t


def _adam_one(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, *, lr, beta1, beta2,
              weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, decoupled):
    p, g = _opmath(param), _opmath(grad)
    m, v = _opmath(exp_avg), _opmath(exp_avg_sq)
    if grad_scale is not None:
        g = g / grad_scale
        unscaled = g
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = m + (1 - beta1) * (g - m)
    v = beta2 * v + (1 - beta2) * g * g
    step = step.to(p.dtype)
    bias_correction1 = 1 - torch.pow(beta1, step)
    bias_correction2_sqrt = torch.sqrt(1 - torch.pow(beta2, step))
    if amsgrad:
        vmax = torch.maximum(_opmath(max_exp_avg_sq), v)
        denom = torch.sqrt(vmax) / bias_correction2_sqrt + eps
    else:
        denom = torch.sqrt(v) / bias_correction2_sqrt + eps
    p = p - (lr / bias_correction1) * m / denom
    updates = [(param, p), (exp_avg, m), (exp_avg_sq, v)]
    if amsgrad:
        updates.append((max_exp_avg_sq, vmax))
    if grad_scale is not None:
        updates.append((grad, unscaled))
    for dst, new in updates:
        if found_inf is not None:  # the step is skipped where GradScaler found an inf or NaN
            new = torch.where(found_inf.bool(), _opmath(dst), new)
        dst.copy_(new)


def _adam(decoupled: bool):
    def step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
             beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        if not amsgrad and len(max_exp_avg_sqs):  # the CPU kernel's check, with its message
            raise RuntimeError("Expected max_exp_avg_sqs.empty() to be true, but got false.")
        lists = (grads, exp_avgs, exp_avg_sqs, state_steps) + ((max_exp_avg_sqs,) if amsgrad else ())
        if any(len(ts) != len(params) for ts in lists):
            raise RuntimeError("torchtpu: the tensor lists of a fused Adam step must have the same "
                               "length as its parameters")
        if isinstance(lr, torch.Tensor) and lr.device.type == "cpu":
            lr = lr.item()  # the kernels read a CPU lr on the host
        for i, param in enumerate(params):
            _adam_one(param, grads[i], exp_avgs[i], exp_avg_sqs[i],
                      max_exp_avg_sqs[i] if amsgrad else None, state_steps[i], lr=lr,
                      beta1=beta1, beta2=beta2, weight_decay=weight_decay, eps=eps,
                      amsgrad=amsgrad, maximize=maximize, grad_scale=grad_scale,
                      found_inf=found_inf, decoupled=decoupled)
    return step


_library = torch.library.Library("aten", "IMPL")


def install() -> None:
    for name, decoupled in (("_fused_adam_", False), ("_fused_adamw_", True)):
        for overload in ("", ".tensor_lr"):
            _library.impl(name + overload, _adam(decoupled), "PrivateUse1")
