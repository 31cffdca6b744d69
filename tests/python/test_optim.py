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
    before = torchtpu.metrics()["executables_compiled"]
    for _ in range(4):
        step()
    assert torchtpu.metrics()["executables_compiled"] == before
