"""The fused optimizer steps on tpu: Adam and AdamW (`torch.optim.Adam(..., fused=True)`,
TorchTitan's default), SGD and Adagrad.

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
    updates = []
    p, g = _param_and_grad(param, grad, updates, grad_scale=grad_scale, maximize=maximize,
                           weight_decay=weight_decay, decoupled_lr=lr if decoupled else None)
    m, v = _opmath(exp_avg), _opmath(exp_avg_sq)
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
    updates += [(param, p), (exp_avg, m), (exp_avg_sq, v)]
    if amsgrad:
        updates.append((max_exp_avg_sq, vmax))
    _write(updates, found_inf)


def _write(updates, found_inf) -> None:
    """Each (tensor, new value) pair written in place; where GradScaler found an inf or NaN
    (found_inf is 1) the step is skipped, as the kernels do."""
    for dst, new in updates:
        if found_inf is not None:
            new = torch.where(found_inf.bool(), _opmath(dst), new)
        dst.copy_(new)


def _param_and_grad(param, grad, updates, *, grad_scale, maximize, weight_decay, decoupled_lr=None):
    """The parameter and its gradient in the step's precision, as the kernels start a step: the
    gradient divided by GradScaler's scale (and written back so), negated to maximize, with the
    weight decay added to it (or, decoupled as AdamW's, taken off the parameter)."""
    p, g = _opmath(param), _opmath(grad)
    if grad_scale is not None:
        g = g / grad_scale
        updates.append((grad, g))
    if maximize:
        g = -g
    if weight_decay != 0:
        if decoupled_lr is not None:
            p = p * (1 - decoupled_lr * weight_decay)
        else:
            g = g + p * weight_decay
    return p, g


def _host_lr(lr):
    return lr.item() if isinstance(lr, torch.Tensor) and lr.device.type == "cpu" else lr


def _check_lengths(kind, params, *lists) -> None:
    if any(len(ts) != len(params) for ts in lists):
        raise RuntimeError(f"torchtpu: the tensor lists of a fused {kind} step must have the same "
                           "length as its parameters")


def _sgd(params, grads, momentum_buffer_list, *, weight_decay, momentum, lr, dampening, nesterov,
         maximize, is_first_step, grad_scale=None, found_inf=None):
    if momentum == 0 and len(momentum_buffer_list):  # the CPU kernel's checks
        raise RuntimeError("Expected momentum_buffer_list.empty() to be true, but got false.")
    _check_lengths("SGD", params, grads, *((momentum_buffer_list,) if momentum != 0 else ()))
    lr = _host_lr(lr)
    for i, param in enumerate(params):
        updates = []
        p, g = _param_and_grad(param, grads[i], updates, grad_scale=grad_scale, maximize=maximize,
                               weight_decay=weight_decay)
        if momentum != 0:
            buf = momentum_buffer_list[i]
            b = g if is_first_step else _opmath(buf) * momentum + g * (1 - dampening)
            updates.append((buf, b))
            g = g + b * momentum if nesterov else b
        updates.append((param, p - g * lr))
        _write(updates, found_inf)


def _adagrad(params, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps, maximize,
             grad_scale=None, found_inf=None):
    _check_lengths("Adagrad", params, grads, state_sums, state_steps)
    lr = _host_lr(lr)
    for i, param in enumerate(params):
        updates = []
        p, g = _param_and_grad(param, grads[i], updates, grad_scale=grad_scale, maximize=maximize,
                               weight_decay=weight_decay)
        s = _opmath(state_sums[i]) + g * g
        clr = lr / (1 + (state_steps[i].to(p.dtype) - 1) * lr_decay)
        updates += [(state_sums[i], s), (param, p - clr * g / (torch.sqrt(s) + eps))]
        _write(updates, found_inf)


def _adam(decoupled: bool):
    def step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr, beta1,
             beta2, weight_decay, eps, amsgrad, maximize, grad_scale=None, found_inf=None):
        if not amsgrad and len(max_exp_avg_sqs):  # the CPU kernel's check, with its message
            raise RuntimeError("Expected max_exp_avg_sqs.empty() to be true, but got false.")
        _check_lengths("Adam", params, grads, exp_avgs, exp_avg_sqs, state_steps,
                       *((max_exp_avg_sqs,) if amsgrad else ()))
        lr = _host_lr(lr)  # the kernels read a CPU lr on the host
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
    for name, step in (("_fused_sgd_", _sgd), ("_fused_adagrad_", _adagrad)):
        for overload in ("", ".tensor_lr"):
            _library.impl(name + overload, step, "PrivateUse1")
