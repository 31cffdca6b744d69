"""Optimizers step on "tpu" exactly as on CPU, including their foreach paths."""

import pytest
import torch

OPTIMIZERS = {
    "sgd_momentum": lambda p, foreach: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                       weight_decay=0.01, foreach=foreach),
    "adam": lambda p, foreach: torch.optim.Adam(p, lr=1e-2, foreach=foreach),
    "adamw": lambda p, foreach: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=foreach),
}


@pytest.mark.usefixtures("fallback_error")
@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_matches_cpu(name, foreach):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    dev = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    dev.load_state_dict(ref.state_dict())
    dev.to("tpu")
    opt_ref, opt_dev = OPTIMIZERS[name](ref.parameters(), foreach), OPTIMIZERS[name](
        dev.parameters(), foreach)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for _ in range(5):
        for model, opt, xb, yb in [(ref, opt_ref, x, y), (dev, opt_dev, x.to("tpu"), y.to("tpu"))]:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xb), yb).backward()
            opt.step()
    for a, b in zip(ref.parameters(), dev.parameters()):
        torch.testing.assert_close(b.detach().cpu(), a.detach(), rtol=1e-5, atol=1e-6)


def test_learning_rate_schedule_does_not_recompile():
    import torchtpu

    model = torch.nn.Linear(3, 1).to("tpu")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x = torch.randn(4, 3).to("tpu")

    def step():
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
        sched.step()

    step()
    step()
    before = torchtpu.metrics()["executable_cache_misses"]
    for _ in range(4):
        step()
    assert torchtpu.metrics()["executable_cache_misses"] == before


# The fused kernels, against the CPU's: every option, half-precision tensors, GradScaler's
# grad_scale and found_inf, and a tensor learning rate.
FUSED_CASES = {
    "plain": {},
    "weight_decay": {"weight_decay": 0.1},
    "amsgrad_maximize": {"amsgrad": True, "maximize": True, "weight_decay": 0.05},
    "bfloat16": {"dtype": torch.bfloat16, "weight_decay": 0.1},
    "grad_scale": {"grad_scale": 8.0, "found_inf": 0.0},
    "found_inf": {"grad_scale": 8.0, "found_inf": 1.0},
    "tensor_lr": {"tensor_lr": True, "amsgrad": True},
}


def _fused_state(device, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(5, 3), (7,), ()]
    made = [[torch.randn(s, generator=g).to(dtype) for s in shapes] for _ in range(4)]
    params, grads, exp_avgs, exp_avg_sqs = made
    exp_avg_sqs = [t.abs() for t in exp_avg_sqs]
    max_sqs = [t * 1.5 for t in exp_avg_sqs]
    steps = [torch.tensor(float(k + 1)) for k in range(len(shapes))]
    return [[t.to(device) for t in ts] for ts in
            (params, grads, exp_avgs, exp_avg_sqs, max_sqs, steps)]


@pytest.mark.usefixtures("fallback_error")
@pytest.mark.parametrize("decoupled", [False, True], ids=["adam", "adamw"])
@pytest.mark.parametrize("case", sorted(FUSED_CASES))
def test_fused_adam_matches_cpu(case, decoupled, each_eager_mode):
    options = dict(FUSED_CASES[case])
    dtype = options.pop("dtype", torch.float32)
    scale, found = options.pop("grad_scale", None), options.pop("found_inf", None)
    tensor_lr = options.pop("tensor_lr", False)
    fused = torch._fused_adamw_ if decoupled else torch._fused_adam_
    results = {}
    for device in ("cpu", "tpu"):
        state = _fused_state(device, dtype)
        if not options.get("amsgrad"):
            state[4] = []  # both kernels want none then
        kwargs = dict(lr=torch.tensor(0.01, device=device) if tensor_lr else 0.01, beta1=0.9,
                      beta2=0.99, weight_decay=0.0, eps=1e-8, amsgrad=False, maximize=False)
        kwargs.update(options)
        if scale is not None:
            kwargs["grad_scale"] = torch.tensor(scale, device=device)
            kwargs["found_inf"] = torch.tensor(found, device=device)
        fused(*state, **kwargs)
        results[device] = [[t.cpu() for t in ts] for ts in state[:5]]
    tol = {"rtol": 1e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-5, "atol": 1e-6}
    for name, cpu, tpu in zip(["param", "grad", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"],
                              results["cpu"], results["tpu"]):
        assert len(cpu) == len(tpu)
        for c, t in zip(cpu, tpu):
            assert t.dtype == c.dtype
            torch.testing.assert_close(t, c, **tol, msg=lambda m, n=name: f"{n}: {m}")


def test_fused_adam_refuses_what_the_cpu_refuses():
    state = _fused_state("tpu", torch.float32)
    with pytest.raises(RuntimeError, match="max_exp_avg_sqs.empty"):
        torch._fused_adam_(*state, lr=0.1, beta1=0.9, beta2=0.99, weight_decay=0.0, eps=1e-8,
                           amsgrad=False, maximize=False)


@pytest.mark.usefixtures("fallback_error")
def test_adamw_fused_option_steps_on_the_device():
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 3)
    dev = torch.nn.Linear(4, 3).to("tpu")
    dev.load_state_dict(ref.state_dict())
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1, fused=True)
            for m in (ref, dev)]
    x = torch.randn(8, 4)
    for _ in range(3):
        for model, opt, xb in [(ref, opts[0], x), (dev, opts[1], x.to("tpu"))]:
            opt.zero_grad()
            model(xb).square().mean().backward()
            opt.step()
    torch.testing.assert_close(dev.weight.cpu(), ref.weight, rtol=1e-5, atol=1e-6)
