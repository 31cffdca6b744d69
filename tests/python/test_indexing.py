"""Advanced indexing on "tpu" against the CPU: every indexing entry point (x[idx], x[idx] = v,
index_put_, index_select, gather, scatter, masked_*, take/put, embedding) over masks of every rank
and position, index tensors of every dtype and device, empty and 0-d indices, non-contiguous
operands, and the inputs PyTorch refuses. Each case runs on the CPU and on tpu in every eager mode:
the values must match exactly, or both must raise the same exception type."""

import warnings

import pytest
import torch

import torchtpu

MODES = ["strict", "debug", "defer_and_fuse"]


def vals(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-9, 10, shape, generator=g).to(dtype)


def mask(*shape, seed=1):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.5


X = vals(5, 4, 3)
I = torch.tensor([0, -1, 2, 2])
J = torch.tensor([[1], [3]])
M5, M4, M3 = mask(5), mask(4), mask(3)
M54, M43, M543 = mask(5, 4), mask(4, 3), mask(5, 4, 3)


def scatter_reduce_case(reduce, include_self):
    return lambda d: X.to(d).scatter_reduce(1, torch.tensor([[[0, 1, 0]], [[3, 3, 3]]]).to(d),
                                            vals(2, 1, 3).to(d), reduce, include_self=include_self)


def put(x, key, v):
    x[key] = v
    return x


def fresh(d, t=None):
    """A copy of `t` (default X) on `d`: the CPU run of an in-place case must not write X."""
    return (X if t is None else t).clone().to(d)


# Each case: (name, fn(device) -> tensor). Tensors move to the device unless a case keeps an index
# on the CPU on purpose (CUDA accepts CPU index tensors and masks into device tensors).
def on(d, *ts):
    return [t.to(d) for t in ts]


GETITEM = {
    "mask_full": lambda d: X.to(d)[M543.to(d)],
    "mask_leading_2d": lambda d: X.to(d)[M54.to(d)],
    "mask_dim1": lambda d: X.to(d)[:, M4.to(d)],
    "mask_trailing_2d": lambda d: X.to(d)[:, M43.to(d)],
    "mask_then_int": lambda d: X.to(d)[M5.to(d), 0],
    "mask_after_none": lambda d: X.to(d)[None, M5.to(d)],
    "mask_none_slice": lambda d: X.to(d)[M5.to(d), None, 1:3],
    "mask_ellipsis": lambda d: X.to(d)[..., M3.to(d)],
    "mask_and_index": lambda d: X.to(d)[M5.to(d), :, torch.tensor([0, 2, 1]).to(d)[:1]],
    "mask_all_false": lambda d: X.to(d)[torch.zeros(5, dtype=torch.bool).to(d)],
    "mask_all_false_dim1": lambda d: X.to(d)[:, torch.zeros(4, 3, dtype=torch.bool).to(d)],
    "mask_empty_self": lambda d: vals(0, 3).to(d)[torch.zeros(0, dtype=torch.bool).to(d)],
    "mask_0d_true": lambda d: X.to(d)[torch.tensor(True).to(d)],
    "mask_0d_false": lambda d: X.to(d)[torch.tensor(False).to(d)],
    "mask_uint8": lambda d: X.to(d)[M5.to(torch.uint8).to(d)],
    "mask_noncontiguous": lambda d: X.to(d)[M54.t().contiguous().t().to(d)],
    "mask_on_noncontiguous_self": lambda d: X.to(d).transpose(0, 2)[M3.to(d)],
    "mask_cpu": lambda d: X.to(d)[M5],
    "mask_cpu_dim1": lambda d: X.to(d)[:, M43],
    "mask_cpu_uint8": lambda d: X.to(d)[M54.to(torch.uint8)],
    "mask_wrong_shape": lambda d: X.to(d)[torch.tensor([True]).to(d)],
    "mask_wrong_shape_dim1": lambda d: X.to(d)[:, torch.tensor([True, False]).to(d)],
    "mask_wrong_shape_2d": lambda d: X.to(d)[mask(5, 3).to(d)],
    "mask_too_many_dims": lambda d: X.to(d)[:, :, mask(3, 2).to(d)],
    "mask_wrong_shape_cpu": lambda d: X.to(d)[torch.tensor([True])],
    "mask_0d_self": lambda d: torch.tensor(3.0).to(d)[torch.tensor(True).to(d)],
    "index_long": lambda d: X.to(d)[I.to(d)],
    "index_dim1": lambda d: X.to(d)[:, I[:3].to(d)],
    "index_int32": lambda d: X.to(d)[I.int().to(d)],
    "index_broadcast": lambda d: X.to(d)[J.to(d), I[:3].to(d)],
    "index_split": lambda d: X.to(d)[J.to(d), :, I[:3].to(d)],
    "index_0d": lambda d: X.to(d)[torch.tensor(2).to(d)],
    "index_0d_with_1d": lambda d: X.to(d)[torch.tensor(2).to(d), I[:2].to(d)],
    "index_noncontiguous": lambda d: X.to(d)[torch.arange(8).view(2, 4).t()[::2].to(d) % 5],
    "index_on_noncontiguous_self": lambda d: X.to(d).permute(2, 0, 1)[I[:2].to(d)],
    "index_0d_self_empty_list": lambda d: torch.tensor(3.0).to(d)[()],
    "index_cpu_long": lambda d: X.to(d)[I],
    "index_cpu_int32": lambda d: X.to(d)[:, I[:2].int()],
    "index_cpu_and_device": lambda d: X.to(d)[J, I[:3].to(d)],
    "index_empty_list": lambda d: X.to(d)[[]],
    "index_empty_dim1": lambda d: X.to(d)[:, []],
    "index_empty_2d": lambda d: X.to(d)[torch.zeros(0, 2, dtype=torch.long).to(d)],
    "index_empty_broadcast": lambda d: X.to(d)[torch.zeros(0, 1, dtype=torch.long).to(d),
                                               I[:3].to(d)],
    "index_empty_self": lambda d: vals(0, 3).to(d)[:, torch.tensor([0, 2]).to(d)],
    "index_float": lambda d: X.to(d)[torch.tensor([0.0, 1.0]).to(d)],
    "index_int16": lambda d: X.to(d)[I.short().to(d)],
    "index_int8": lambda d: X.to(d)[I.to(torch.int8).to(d)],
    "index_shape_mismatch": lambda d: X.to(d)[I[:2].to(d), I[:3].to(d)],
    "index_shape_mismatch_cpu": lambda d: X.to(d)[I[:2], I[:3]],
    "index_too_many": lambda d: X.to(d)[I.to(d), I.to(d), I.to(d), I.to(d)],
    "aten_index": lambda d: torch.ops.aten.index(X.to(d), [None, I[:2].to(d)]),
    "aten_index_mask": lambda d: torch.ops.aten.index(X.to(d), [M5.to(d)]),
    "aten_index_mask_wrong": lambda d: torch.ops.aten.index(X.to(d), [mask(2).to(d)]),
    "aten_index_empty_list": lambda d: torch.ops.aten.index(X.to(d), []),
    "aten_index_too_many": lambda d: torch.ops.aten.index(X.to(d), [I.to(d)] * 4),
    "aten_index_mask_too_many": lambda d: torch.ops.aten.index(X.to(d), [None, None, M43.to(d)]),
    "aten_index_cpu_0d": lambda d: torch.ops.aten.index(X.to(d), [None, torch.tensor(1)]),
    "aten_index_0d_mask": lambda d: torch.ops.aten.index(X.to(d), [torch.tensor(True).to(d)]),
    "mask_cpu_and_device_index": lambda d: X.to(d)[M5, torch.tensor([1]).to(d)],
    "bool_list": lambda d: X.to(d)[[True, False, True, True, False]],
    "int_lists": lambda d: X.to(d)[[[0], [1]], [1, 2]],
    "index_bool_self": lambda d: (X.to(d) > 0)[I.to(d)],
    "index_int_self_mask": lambda d: X.int().to(d)[:, M43.to(d)],
    "aten_unsafe_index": lambda d: torch.ops.aten._unsafe_index(X.to(d), [None, I[:2].to(d)]),
}

SETITEM = {
    "set_mask_scalar": lambda d: put(fresh(d), M5.to(d), 1.5),
    "set_mask_full_tensor": lambda d: put(fresh(d), M543.to(d), vals(int(M543.sum())).to(d)),
    "set_mask_broadcast_row": lambda d: put(fresh(d), M5.to(d), vals(4, 3).to(d)),
    "set_mask_0d_value": lambda d: put(fresh(d), M54.to(d), torch.tensor(2.0).to(d)),
    "set_mask_dim1": lambda d: put(fresh(d), (slice(None), M4.to(d)), -1.0),
    "set_mask_then_int": lambda d: put(fresh(d), (M5.to(d), 0), 7.0),
    "set_mask_all_false": lambda d: put(fresh(d), torch.zeros(5, dtype=torch.bool).to(d), 2.0),
    "set_mask_all_false_tensor": lambda d: put(fresh(d), torch.zeros(5, dtype=torch.bool).to(d),
                                               vals(0, 4, 3).to(d)),
    "set_mask_uint8": lambda d: put(fresh(d), M5.to(torch.uint8).to(d), vals(4, 3).to(d)),
    "set_mask_cpu": lambda d: put(fresh(d), M5, 4.0),
    "set_mask_cpu_random": lambda d: put(fresh(d), vals(5, 4, 3) > 0.5, 4.0),
    "set_mask_cpu_tensor_value": lambda d: put(fresh(d), M54, vals(int(M54.sum()), 3).to(d)),
    "set_mask_cpu_value_cast": lambda d: put(fresh(d), M5.to(d), torch.tensor(2)),
    "set_mask_cpu_value_dim1": lambda d: put(fresh(d), (slice(None), M43.to(d)), torch.tensor(1.0)),
    "set_mask_uint8_cpu_value": lambda d: put(fresh(d), M5.to(torch.uint8).to(d),
                                              torch.tensor(3.0)),
    "set_mask_wrong_shape_cpu_value": lambda d: put(fresh(d), (None, mask(4).to(d)),
                                                    torch.tensor(3.0)),
    "set_mask_too_long_cpu_value": lambda d: put(fresh(d), (None, None, mask(3, 2).to(d)),
                                                 torch.tensor(3.0)),
    "index_put_functional_mask_cpu_value": lambda d: X.to(d).index_put((M54.to(d),),
                                                                       torch.tensor(1.0)),
    "set_mask_0d_true": lambda d: put(fresh(d), torch.tensor(True).to(d), 1.0),
    "set_mask_wrong_value_shape": lambda d: put(fresh(d), M543.to(d), vals(2).to(d)),
    "set_mask_wrong_value_shape_2": lambda d: put(fresh(d), M5.to(d), vals(2, 3).to(d)),
    "set_mask_wrong_shape": lambda d: put(fresh(d), torch.tensor([True]).to(d), 1.0),
    "set_mask_wrong_shape_dim1": lambda d: put(fresh(d), (slice(None), mask(3).to(d)), 1.0),
    "set_index": lambda d: put(fresh(d), I[:3].to(d), vals(3, 4, 3).to(d)),
    "set_index_scalar": lambda d: put(fresh(d), (slice(None), I[:2].to(d)), 0.5),
    "set_index_int32": lambda d: put(fresh(d), I[:3].int().to(d), 0.5),
    "set_index_broadcast": lambda d: put(fresh(d), (J.to(d), I[:3].to(d)), vals(3, 1).to(d)),
    "set_index_cpu": lambda d: put(fresh(d), I[:3], 0.5),
    "set_index_cpu_split": lambda d: put(fresh(d), (J, slice(None), I[:3]), 0.5),
    "set_index_empty_list": lambda d: put(fresh(d), [], 1.0),
    "set_index_empty_dim1": lambda d: put(fresh(d), (slice(None), []), 1.0),
    "set_index_empty_tensor_value": lambda d: put(fresh(d), torch.zeros(0, dtype=torch.long).to(d),
                                                  vals(0, 4, 3).to(d)),
    "set_index_float": lambda d: put(fresh(d), torch.tensor([0.0]).to(d), 1.0),
    "set_index_int16": lambda d: put(fresh(d), I.short().to(d), 1.0),
    "set_index_shape_mismatch": lambda d: put(fresh(d), (I[:2].to(d), I[:3].to(d)), 1.0),
    "set_index_wrong_value_shape": lambda d: put(fresh(d), I[:3].to(d), vals(2, 4, 3).to(d)),
    "set_noncontiguous_self": lambda d: put(fresh(d).transpose(0, 1), I[:2].to(d), 9.0),
    "index_put_accumulate": lambda d: fresh(d).index_put_((I.to(d),), vals(4, 4, 3).to(d),
                                                         accumulate=True),
    "index_put_accumulate_mask": lambda d: fresh(d).index_put_((M5.to(d),),
                                                              torch.tensor(1.0).to(d), True),
    "index_put_accumulate_cpu": lambda d: torch.ops.aten.index_put_(
        fresh(d), [None, I[:3]], torch.tensor(1.0).to(d), True),
    "set_bool_self_mask": lambda d: put(fresh(d, X > 0), M5.to(d), True),
    "set_int_self_index_accumulate": lambda d: fresh(d, X.long()).index_put_(
        (I.to(d), I.abs().to(d)), torch.tensor(3).to(d), True),
    "set_into_empty_self": lambda d: put(fresh(d, vals(0, 3)), (slice(None), I[:2].abs()
                                                                .to(d)), 1.0),
    "set_into_empty_dim": lambda d: put(fresh(d, vals(0, 3)), torch.tensor([0]).to(d), 1.0),
    "set_mask_2d_accumulate": lambda d: fresh(d).index_put_((M54.to(d),), vals(3).to(d), True),
    "set_mask_cpu_accumulate": lambda d: fresh(d).index_put_((M543,), torch.tensor(1.0).to(d),
                                                             True),
    "unsafe_index_put": lambda d: torch.ops.aten._unsafe_index_put(
        X.to(d), [I[:3].abs().to(d)], vals(3, 4, 3).to(d), False),
    "index_put_functional": lambda d: fresh(d).index_put((I[:2].to(d),), torch.tensor(2.0).to(d)),
    "index_put_empty_indices": lambda d: vals().to(d).index_put([], vals(1).to(d), True),
    "index_put_empty_indices_no_acc": lambda d: vals(3).to(d).index_put([], vals(3).to(d)),
    "index_put_too_many": lambda d: fresh(d).index_put_((I.to(d),) * 4, torch.tensor(1.0).to(d)),
    "index_put_dtype_mismatch": lambda d: fresh(d).index_put_((I.to(d),),
                                                             torch.tensor(1.0).double().to(d)),
    "index_put_empty_index_accumulate": lambda d: fresh(d).index_put_(
        (torch.zeros(0, dtype=torch.long).to(d),), torch.tensor(1.0).to(d), True),
    "index_put_0d_self_mask": lambda d: vals().to(d).index_put_((torch.tensor(True).to(d),),
                                                                torch.tensor(5.0).to(d)),
}

OPS = {
    "index_select": lambda d: X.to(d).index_select(1, torch.tensor([3, 0, 0]).to(d)),
    "index_select_int32": lambda d: X.to(d).index_select(0, I.abs().int().to(d)),
    "index_select_0d_index": lambda d: X.to(d).index_select(2, torch.tensor(1).to(d)),
    "index_select_empty": lambda d: X.to(d).index_select(1, torch.zeros(0, dtype=torch.long)
                                                         .to(d)),
    "index_select_0d_self": lambda d: vals().to(d).index_select(0, torch.tensor([0]).to(d)),
    "index_select_noncontiguous": lambda d: X.to(d).transpose(0, 2).index_select(
        1, torch.arange(8).to(d)[::3] % 4),
    "index_select_empty_self": lambda d: vals(3, 0).to(d).index_select(0, torch.tensor([1, 2])
                                                                       .to(d)),
    "index_select_empty_self_empty_index": lambda d: vals(0, 3).to(d).index_select(
        0, torch.zeros(0, dtype=torch.long).to(d)),
    "index_select_2d_index": lambda d: X.to(d).index_select(0, J.to(d)),
    "index_select_float": lambda d: X.to(d).index_select(0, torch.tensor([0.0]).to(d)),
    "index_select_int16": lambda d: X.to(d).index_select(0, I.abs().short().to(d)),
    "index_select_0d_self_two": lambda d: vals().to(d).index_select(0, torch.tensor([0, 0]).to(d)),
    "index_select_bad_dim": lambda d: X.to(d).index_select(3, I.to(d)),
    "gather": lambda d: X.to(d).gather(1, torch.tensor([[[0, 1, 3]], [[2, 2, 0]]]).to(d)),
    "gather_empty": lambda d: X.to(d).gather(1, torch.zeros(5, 0, 3, dtype=torch.long).to(d)),
    "gather_empty_self": lambda d: vals(0, 3).to(d).gather(1, torch.zeros(0, 2, dtype=torch.long)
                                                          .to(d)),
    "gather_0d": lambda d: vals().to(d).gather(0, torch.tensor(0).to(d)),
    "gather_noncontiguous_index": lambda d: X.to(d).gather(
        0, (torch.arange(60).view(3, 4, 5).permute(2, 1, 0) % 5).to(d)),
    "gather_int32": lambda d: X.to(d).gather(1, torch.zeros(5, 1, 3, dtype=torch.int).to(d)),
    "gather_float": lambda d: X.to(d).gather(1, torch.zeros(5, 1, 3).to(d)),
    "gather_rank_mismatch": lambda d: X.to(d).gather(1, torch.zeros(5, 1, dtype=torch.long)
                                                     .to(d)),
    "gather_too_large": lambda d: X.to(d).gather(1, torch.zeros(6, 1, 3, dtype=torch.long)
                                                 .to(d)),
    "scatter": lambda d: X.to(d).scatter(1, torch.tensor([[[0, 1, 3]]]).to(d), vals(1, 1, 3)
                                         .to(d)),
    "scatter_value": lambda d: X.to(d).scatter(2, torch.tensor([[[2]]]).to(d), 4.0),
    "scatter_add": lambda d: X.to(d).scatter_add(0, torch.zeros(3, 4, 3, dtype=torch.long)
                                                 .to(d), vals(3, 4, 3).to(d)),
    "scatter_empty": lambda d: X.to(d).scatter(1, torch.zeros(5, 0, 3, dtype=torch.long).to(d),
                                               vals(5, 0, 3).to(d)),
    "scatter_add_empty": lambda d: X.to(d).scatter_add(0, torch.zeros(0, 4, 3, dtype=torch.long)
                                                       .to(d), vals(0, 4, 3).to(d)),
    "scatter_0d": lambda d: vals().to(d).scatter(0, torch.tensor(0).to(d), 2.0),
    "scatter_int32": lambda d: X.to(d).scatter(1, torch.zeros(5, 1, 3, dtype=torch.int).to(d),
                                               1.0),
    "scatter_float_index": lambda d: X.to(d).scatter(1, torch.zeros(5, 1, 3).to(d), 1.0),
    "scatter_rank_mismatch": lambda d: X.to(d).scatter_add(1, torch.zeros(5, 1, dtype=torch.long)
                                                           .to(d), vals(5, 1).to(d)),
    "scatter_src_too_small": lambda d: X.to(d).scatter(1, torch.zeros(5, 2, 3, dtype=torch.long)
                                                       .to(d), vals(5, 1, 3).to(d)),
    "masked_fill": lambda d: X.to(d).masked_fill(M43.to(d), 2.0),
    "masked_fill_0d_mask": lambda d: X.to(d).masked_fill(torch.tensor(True).to(d), 2.0),
    "masked_fill_tensor_value": lambda d: X.to(d).masked_fill(M43.to(d), torch.tensor(2.0).to(d)),
    "masked_fill_1d_value": lambda d: X.to(d).masked_fill(M43.to(d), vals(1).to(d)),
    "masked_fill_empty": lambda d: vals(0, 3).to(d).masked_fill(mask(0, 3).to(d), 1.0),
    "masked_fill_uint8": lambda d: X.to(d).masked_fill(M43.to(torch.uint8).to(d), 2.0),
    "masked_fill_wrong_shape": lambda d: X.to(d).masked_fill(mask(2).to(d), 2.0),
    "masked_fill_inplace_broadcast_self": lambda d: vals(4, 3).to(d).masked_fill_(M543.to(d), 1.0),
    "masked_select": lambda d: X.to(d).masked_select(M43.to(d)),
    "masked_select_broadcast_self": lambda d: vals(4, 3).to(d).masked_select(M543.to(d)),
    "masked_select_0d": lambda d: vals().to(d).masked_select(torch.tensor(True).to(d)),
    "masked_select_0d_mask": lambda d: X.to(d).masked_select(torch.tensor(True).to(d)),
    "masked_select_all_false": lambda d: X.to(d).masked_select(torch.zeros(3, dtype=torch.bool)
                                                               .to(d)),
    "masked_select_cpu_mask": lambda d: X.to(d).masked_select(M43),
    "masked_select_uint8": lambda d: X.to(d).masked_select(M43.to(torch.uint8).to(d)),
    "masked_select_wrong_shape": lambda d: X.to(d).masked_select(mask(2).to(d)),
    "masked_scatter": lambda d: X.to(d).masked_scatter(M43.to(d), vals(60).to(d)),
    "masked_scatter_too_few": lambda d: X.to(d).masked_scatter(M543.to(d), vals(2).to(d)),
    "masked_scatter_broadcast_self": lambda d: vals(4, 3).to(d).masked_scatter(M543.to(d),
                                                                              vals(60).to(d)),
    "take": lambda d: X.to(d).take(torch.tensor([[0, 59], [-1, 7]]).to(d)),
    "take_noncontiguous_self": lambda d: X.to(d).transpose(0, 2).take(torch.tensor([1, 7]).to(d)),
    "take_empty": lambda d: X.to(d).take(torch.zeros(0, dtype=torch.long).to(d)),
    "take_int32": lambda d: X.to(d).take(torch.tensor([1]).int().to(d)),
    "put": lambda d: fresh(d).put_(torch.tensor([0, 59]).to(d), vals(2).to(d)),
    "put_accumulate": lambda d: fresh(d).put_(torch.tensor([3, 3]).to(d), vals(2).to(d), True),
    "index_add": lambda d: X.to(d).index_add(1, I[:3].abs().to(d), vals(5, 3, 3).to(d)),
    "index_add_wrong_shape": lambda d: X.to(d).index_add(1, I[:3].abs().to(d), vals(5, 2, 3)
                                                         .to(d)),
    "index_fill": lambda d: X.to(d).index_fill(2, torch.tensor([0, 2]).to(d), -1.0),
    "index_copy": lambda d: X.to(d).index_copy(0, torch.tensor([4, 1]).to(d), vals(2, 4, 3)
                                               .to(d)),
    "index_copy_float_index": lambda d: X.to(d).index_copy(0, torch.tensor([4.0]).to(d),
                                                           vals(1, 4, 3).to(d)),
    "scatter_reduce_amax": lambda d: X.to(d).scatter_reduce(
        0, torch.zeros(2, 4, 3, dtype=torch.long).to(d), vals(2, 4, 3).to(d), "amax"),
    "take_along_dim": lambda d: torch.take_along_dim(X.to(d), torch.tensor([[[0], [2]]]).to(d),
                                                     dim=1),
    "augmented_setitem": lambda d: put(fresh(d), I[:3].abs().to(d),
                                       fresh(d)[I[:3].abs().to(d)] + 1),
    "embedding": lambda d: torch.nn.functional.embedding(J.to(d), vals(4, 3).to(d)),
    "embedding_int32": lambda d: torch.nn.functional.embedding(J.int().to(d), vals(4, 3).to(d)),
    "embedding_padding": lambda d: torch.nn.functional.embedding(J.to(d), vals(4, 3).to(d),
                                                                 padding_idx=1),
    "embedding_empty": lambda d: torch.nn.functional.embedding(torch.zeros(0, dtype=torch.long)
                                                               .to(d), vals(4, 3).to(d)),
    "embedding_float": lambda d: torch.nn.functional.embedding(J.float().to(d), vals(4, 3).to(d)),
    "index_add_duplicates": lambda d: X.to(d).index_add(0, torch.tensor([1, 1, 3, 1]).to(d),
                                                        torch.ones(4, 4, 3).to(d), alpha=2),
    "index_add_int": lambda d: X.long().to(d).index_add_(2, torch.tensor([2, 2]).to(d),
                                                        vals(5, 4, 2, dtype=torch.long).to(d)),
    "index_add_0d": lambda d: vals().to(d).index_add(0, torch.tensor([0, 0]).to(d),
                                                     torch.ones(2).to(d)),
    "index_add_noncontiguous": lambda d: X.to(d).transpose(0, 2).index_add(
        1, torch.tensor([3, 0]).to(d), vals(4, 3, 2).to(d).transpose(0, 1)),
    "index_add_negative_dim": lambda d: X.to(d).index_add(-1, torch.tensor([2, 0]).to(d),
                                                          vals(5, 4, 2).to(d)),
    "index_add_out": lambda d: torch.index_add(X.to(d), 0, torch.tensor([1]).to(d),
                                               vals(1, 4, 3).to(d), out=torch.empty(5, 4, 3).to(d)),
    "index_copy_inplace_dim2": lambda d: fresh(d).index_copy_(2, torch.tensor([2, 0]).to(d),
                                                              vals(5, 4, 2).to(d)),
    "index_copy_empty_index": lambda d: X.to(d).index_copy(1, E.to(d), vals(5, 0, 3).to(d)),
    "index_fill_negative_index": lambda d: fresh(d).index_fill_(1, torch.tensor([-1, 0]).to(d), 3.0),
    "index_fill_tensor_value": lambda d: X.to(d).index_fill(0, torch.tensor([4]).to(d),
                                                            torch.tensor(-2.0).to(d)),
    "index_fill_bool": lambda d: (X > 0).to(d).index_fill(1, torch.tensor([1]).to(d), True),
    "index_reduce_prod": lambda d: X.to(d).index_reduce(0, torch.tensor([1, 1, 4]).to(d),
                                                        vals(3, 4, 3).to(d), "prod"),
    "index_reduce_mean_exclude_self": lambda d: X.to(d).index_reduce(
        0, torch.tensor([1, 1, 4]).to(d), vals(3, 4, 3).to(d), "mean", include_self=False),
    "index_reduce_amax_exclude_self": lambda d: X.to(d).index_reduce(
        1, torch.tensor([0, 0]).to(d), vals(5, 2, 3).to(d), "amax", include_self=False),
    "index_reduce_amin_int_mean": lambda d: X.long().to(d).index_reduce(
        2, torch.tensor([0, 0, 1]).to(d), vals(5, 4, 3, dtype=torch.long).to(d), "mean"),
    **{f"scatter_reduce_{r}_{s}": scatter_reduce_case(r, s)
       for r in ["sum", "prod", "mean", "amax", "amin"] for s in [True, False]},
    "scatter_reduce_int_mean": lambda d: X.long().to(d).scatter_reduce(
        0, torch.zeros(2, 4, 3, dtype=torch.long).to(d), vals(2, 4, 3, dtype=torch.long).to(d),
        "mean", include_self=False),
    "scatter_reduce_nan_amax": lambda d: X.to(d).scatter_reduce(
        0, torch.zeros(1, 4, 3, dtype=torch.long).to(d), torch.full((1, 4, 3), float("nan")).to(d),
        "amax"),
    "scatter_multiply": lambda d: fresh(d).scatter_(0, torch.tensor([[[0, 1, 0]]]).to(d),
                                                    vals(1, 1, 3).to(d), reduce="multiply"),
    "scatter_value_add": lambda d: fresh(d).scatter_(0, torch.tensor([[[0, 0, 0]]]).to(d), 2.0,
                                                     reduce="add"),
    "put_negative": lambda d: fresh(d).put_(torch.tensor([-1, -60]).to(d), vals(2).to(d)),
    "put_accumulate_int": lambda d: X.long().to(d).put_(torch.tensor([[3, 3], [0, 3]]).to(d),
                                                        torch.ones(2, 2, dtype=torch.long).to(d),
                                                        accumulate=True),
    "put_noncontiguous_self": lambda d: fresh(d).transpose(0, 2).put_(torch.tensor([1, 7]).to(d),
                                                                      vals(2).to(d)),
    "masked_scatter_inplace_broadcast_mask": lambda d: fresh(d).masked_scatter_(
        M3.to(d), vals(60).to(d)),
    "masked_scatter_int": lambda d: X.long().to(d).masked_scatter(M543.to(d),
                                                                  vals(60, dtype=torch.long).to(d)),
    "isin": lambda d: torch.isin(torch.tensor([[1, 2], [3, 9]]).to(d), torch.tensor([9, 2, 2]).to(d)),
    "isin_invert": lambda d: torch.isin(torch.tensor([1, 2, 3]).to(d), torch.tensor([2]).to(d),
                                        invert=True),
    "isin_mixed_dtypes": lambda d: torch.isin(torch.tensor([1.0, 2.5]).to(d),
                                              torch.tensor([1, 2]).to(d)),
    "isin_tensor_scalar": lambda d: torch.isin(torch.tensor([0.1, 0.2]).to(d), 0.1),
    "isin_scalar_tensor": lambda d: torch.isin(2, torch.tensor([1, 2]).to(d)),
    "isin_scalar_float_int_tensor": lambda d: torch.isin(2.5, torch.tensor([1, 2]).to(d)),
    "isin_empty_test": lambda d: torch.isin(torch.tensor([1, 2]).to(d),
                                            torch.tensor([], dtype=torch.long).to(d)),
    "isin_eos_tokens": lambda d: torch.isin(torch.tensor([[50256], [17]]).to(d),
                                            torch.tensor([50256, 2]).to(d)),
}

# Empty results, followed by an op with a non-empty result: DeferAndFuse compiles the two into one
# program.
E = torch.zeros(0, dtype=torch.long)


def flushed(d, r):
    return torch.cat([r.flatten(), vals(2).to(d) * 2])

EMPTY = {
    "empty_index_1d": lambda d: flushed(d, torch.arange(5.0).to(d)[E.to(d)]),
    "empty_two": lambda d: flushed(d, X.to(d)[[], []]),
    "empty_split": lambda d: flushed(d, X.to(d)[[], :, []]),
    "empty_split_2d": lambda d: flushed(d, X.to(d)[E.view(0, 1).to(d), :,
                                                   torch.tensor([1, 2]).to(d)]),
    "empty_mask_on_empty_self": lambda d: flushed(d, vals(0, 4, 3).to(d)[:, M4.to(d)]),
    "empty_put_split": lambda d: flushed(d, fresh(d).index_put_(
        (E.to(d), None, E.to(d)), torch.tensor(1.0).to(d), True)),
    "empty_put_1d": lambda d: flushed(d, torch.arange(5.0).to(d).index_put_((E.to(d),),
                                                                            vals(0).to(d))),
    "empty_put_mask": lambda d: flushed(d, fresh(d).index_put_(
        (mask(5, 4, 3).to(d) & False,), vals(0).to(d))),
    "empty_put_into_empty_self": lambda d: flushed(d, vals(0, 4).to(d).index_put_(
        (mask(0, 4).to(d),), torch.tensor(1.0).to(d))),
    "empty_index_select_0d_self": lambda d: flushed(d, vals().to(d).index_select(0, E.to(d))),
    "empty_index_select_empty_self": lambda d: flushed(d, vals(0, 3).to(d).index_select(
        1, E.to(d))),
    "empty_gather_0d_self": lambda d: flushed(d, vals().to(d).gather(0, E.to(d))),
    "empty_scatter_0d_self": lambda d: flushed(d, vals().to(d).scatter(0, E.to(d), 2.0)),
    "empty_scatter_empty_self": lambda d: flushed(d, vals(0, 3).to(d).scatter_add(
        1, torch.zeros(0, 2, dtype=torch.long).to(d), vals(0, 2).to(d))),
    "empty_take": lambda d: flushed(d, X.to(d).take(E.to(d))),
    "empty_embedding": lambda d: flushed(d, torch.nn.functional.embedding(
        E.view(2, 0).to(d), vals(4, 3).to(d))),
    "empty_masked_select": lambda d: flushed(d, X.to(d).masked_select(M43.to(d) & False)),
}

CASES = {**GETITEM, **SETITEM, **OPS, **EMPTY}

# Refusals where the tpu message differs from the CPU's, and why; every other refusal must carry
# the CPU's message word for word.
MESSAGE_DIFFERS = {
    "index_put_empty_indices_no_acc": "the CPU fails an internal assert",
    "aten_index_0d_mask": "the CPU fails an internal assert",
    "index_put_accumulate_cpu": "the CPU raises for the None entry before dispatch",
    "gather_float": "PyTorch's meta function words it with the dtype",
    "gather_too_large": "PyTorch's meta function prints torch.Size",
    "scatter_src_too_small": "PyTorch's meta function words it differently",
    "masked_fill_wrong_shape": "the broadcast check names the operands the other way round",
    "masked_select_wrong_shape": "the broadcast check names the operands the other way round",
    "embedding_float": "PyTorch names the tensor type by device (tpuFloatType)",
    "masked_scatter_too_few": "checked on the device: the message names the op and the caller",
}


def outcome(fn, device):
    """The result on `device` moved to the CPU, or the exception raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn(device)
        return r.cpu()
    except Exception as e:  # noqa: BLE001  (the type and message are what is compared)
        return e


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", list(CASES))
def test_matches_cpu(name, mode):
    expected = outcome(CASES[name], "cpu")
    with torchtpu.eager_mode(mode):
        got = outcome(CASES[name], "tpu")
    if isinstance(expected, Exception):
        assert type(got) is type(expected), f"cpu raised {expected!r}, tpu gave {got!r}"
        if name not in MESSAGE_DIFFERS:
            assert str(got).split("\n")[0] == str(expected).split("\n")[0]
    else:
        assert not isinstance(got, Exception), f"cpu returned a value, tpu raised {got!r}"
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("index", [
    lambda d: (M5.to(torch.uint8).to(d),),
    lambda d: (slice(None), M43.to(torch.uint8)),  # a CPU mask
])
def test_uint8_mask_is_deprecated_as_on_cpu(index, mode):
    message = ("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
               "instead.")
    with pytest.warns(UserWarning, match=message):
        X[index("cpu")]
    with torchtpu.eager_mode(mode):
        with pytest.warns(UserWarning, match=message):
            X.to("tpu")[index("tpu")]
        x = X.to("tpu")
        with pytest.warns(UserWarning, match=message):
            x[index("tpu")] = vals(1).to("tpu")


# CUDA's device rules, where the CPU has nothing to compare with: advanced indexing takes CPU
# indices into a device tensor, never device indices into a CPU tensor; the other indexing ops
# want their index on the device.
@pytest.mark.parametrize("mode", MODES)
def test_device_index_into_cpu_tensor_is_refused(mode):
    message = r"indices should be either on cpu or on the same device as the indexed tensor \(cpu\)"
    with torchtpu.eager_mode(mode), pytest.raises(RuntimeError, match=message):
        X[I.to("tpu")]


@pytest.mark.parametrize("mode", MODES)
def test_cpu_self_takes_a_0d_tpu_value_as_cuda_does(mode):
    expected = X.clone().index_put_((I,), torch.tensor(2.0))
    with torchtpu.eager_mode(mode):
        got = X.clone().index_put_((I,), torch.tensor(2.0, device="tpu"))
        assert got.device.type == "cpu"
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            X.clone().index_put_((I,), vals(4, 3).to("tpu"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", [
    lambda x: x.index_select(0, I.abs()),
    lambda x: x.gather(0, torch.zeros(1, 4, 3, dtype=torch.long)),
    lambda x: x.scatter(0, torch.zeros(1, 4, 3, dtype=torch.long), 1.0),
    lambda x: torch.nn.functional.embedding(J, x[0]),
])
def test_cpu_index_into_other_indexing_ops_is_a_device_mismatch(op, mode):
    with torchtpu.eager_mode(mode), pytest.raises(RuntimeError, match="Expected all tensors to be "
                                                                      "on the same device"):
        op(X.to("tpu")).cpu()


@pytest.mark.parametrize("mode", MODES)
def test_index_copy_updates_a_static_kv_cache_slice_in_place(mode, fallback_error):
    """Hugging Face's StaticCache writes each step's keys with cache[:, layer].index_copy_(2, pos,
    k): a non-contiguous view of the cache, updated in place on the device."""
    cpu_cache = vals(2, 3, 4, 6, 5)  # batch, layer, heads, positions, head dim
    keys = vals(2, 4, 2, 5, seed=3)
    position = torch.tensor([4, 1])
    with torchtpu.eager_mode(mode):
        cache = cpu_cache.to("tpu")
        layer = cache[:, 1]
        pointer = layer.data_ptr()
        result = layer.index_copy_(2, position.to("tpu"), keys.to("tpu"))
        assert result.data_ptr() == pointer and not layer.is_contiguous()
        got = cache.cpu()
    cpu_cache[:, 1].index_copy_(2, position, keys)
    torch.testing.assert_close(got, cpu_cache, rtol=0, atol=0)


@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_scatter_with_reduce_into_out_runs_on_the_device(reduce, each_eager_mode, fallback_error):
    """scatter's reduce= overloads write their out= on tpu (they had gone to the CPU)."""
    def run(device):
        x = torch.arange(6.0, device=device).reshape(2, 3)
        index = torch.tensor([[0, 1, 0], [1, 0, 1]], device=device)
        src_out, value_out = torch.empty(2, 3, device=device), torch.empty(0, device=device)
        torch.scatter(x, 0, index, torch.full((2, 3), 2.0, device=device), reduce=reduce,
                      out=src_out)
        torch.scatter(x, 0, index, 3.0, reduce=reduce, out=value_out)
        return src_out, value_out
    for got, expected in zip(run("tpu"), run("cpu")):
        assert got.device.type == "tpu"
        torch.testing.assert_close(got.cpu(), expected)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_bincount_of_every_integer_type(dtype, each_eager_mode):
    """bincount counts through index_add, which takes int32 and int64 indices only (a uint8
    input had raised index_add_'s error)."""
    x = torch.tensor([1, 2, 2, 5, 0, 2], dtype=dtype)
    w = torch.linspace(0.5, 3.0, 6)
    assert torch.equal(torch.bincount(x.to("tpu")).cpu(), torch.bincount(x))
    torch.testing.assert_close(torch.bincount(x.to("tpu"), w.to("tpu"), minlength=8).cpu(),
                               torch.bincount(x, w, minlength=8))
