"""torch.distributed.pipelining on tpu, the MPMD case: 2 real processes, each building and running
only its own stage of a model (different programs per rank, activations and gradients crossing by
send/recv), under a GPipe and a 1F1B schedule; losses and weights against a single-process run."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from ranks import assert_passed, run_checks, spawn
from torch import nn

import torchtpu  # noqa: F401  (registers "tpu" in the spawned ranks)

WORLD = 2
STEPS = 10
MICROBATCHES = 4


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 16), nn.GELU(),
                         nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))


def _stage_of(model, stage):
    """Stage 0 is the first three layers, stage 1 the rest."""
    return model[:3] if stage == 0 else model[3:]


def _data():
    """One batch, every step: the losses must fall."""
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 8, generator=g), torch.randn(8, 4, generator=g))] * STEPS


def _reference(data):
    """Each step's loss as the schedules report it (the mean of the micro-batch losses) and the
    final weights, from the whole model on the CPU."""
    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in data:
        loss = sum(F.mse_loss(model(xm), ym)
                   for xm, ym in zip(x.chunk(MICROBATCHES), y.chunk(MICROBATCHES)))
        loss = loss / MICROBATCHES
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, model


def _train(schedule_cls, rank):
    from torch.distributed.pipelining import PipelineStage

    module = _stage_of(_model(), rank).to("tpu")
    stage = PipelineStage(module, rank, WORLD, torch.device("tpu"))
    schedule = schedule_cls(stage, n_microbatches=MICROBATCHES, loss_fn=F.mse_loss)
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    data = _data()
    losses = []
    for x, y in data:
        if rank == 0:
            schedule.step(x.to("tpu"))
        else:
            step_losses = []
            schedule.step(target=y.to("tpu"), losses=step_losses)
            assert len(step_losses) == MICROBATCHES
            losses.append(torch.stack(step_losses).mean().item())
        opt.step()
        opt.zero_grad()
    expected, reference = _reference(data)
    if rank == WORLD - 1:
        torch.testing.assert_close(losses, expected, rtol=1e-4, atol=1e-6)
        assert losses[-1] < losses[0], losses
    for got, want in zip(module.parameters(), _stage_of(reference, rank).parameters()):
        assert got.device.type == "tpu"
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-6)


def _gpipe(rank):
    from torch.distributed.pipelining import ScheduleGPipe

    _train(ScheduleGPipe, rank)


def _one_f_one_b(rank):
    from torch.distributed.pipelining import Schedule1F1B

    _train(Schedule1F1B, rank)


CHECKS = {"gpipe": _gpipe, "1f1b": _one_f_one_b}


def _job(rank, world, results):
    dist.init_process_group("tpu")
    run_checks(results, CHECKS, rank)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return spawn(_job, WORLD, str(tmp_path_factory.mktemp("pipelining")))


@pytest.mark.parametrize("name", list(CHECKS))
def test_pipelining(two_ranks, name):
    assert_passed(two_ranks, name)
