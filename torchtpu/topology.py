"""Topology: a DeviceMesh whose neighbouring ranks sit on physically neighbouring devices.

Each rank describes its device with the attributes its PJRT plugin reports (`coords`,
`core_on_chip`, `process_index`, the ones `torch.tpu.get_device_properties` shows); `mesh_order`
turns those descriptions into the rank order of a mesh, and `distributed_mesh` gathers them over the
default process group and builds the `DeviceMesh`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch


def local_device_attributes(device: Any = None) -> dict:
    """This rank's device, as `mesh_order` reads it: `coords` (a tuple, or None where the plugin
    reports none), `core_on_chip` (an int or None) and `process_index`."""
    props = torch.tpu.get_device_properties(device)
    return {"coords": props.coords, "core_on_chip": props.core_on_chip,
            "process_index": props.process_index}


def _mesh_size(mesh_shape: Sequence[int]) -> int:
    shape = tuple(mesh_shape)
    if not shape or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                            for n in shape):
        raise ValueError(f"mesh_shape must be a non-empty sequence of positive ints, got {shape}")
    return math.prod(shape)


def _coords(rank: int, attributes: Mapping) -> tuple[int, ...] | None:
    coords = attributes.get("coords")
    if coords is None:
        return None
    if (isinstance(coords, (str, bytes)) or not isinstance(coords, Sequence) or not coords
            or not all(isinstance(c, int) and not isinstance(c, bool) for c in coords)):
        raise ValueError(f"rank {rank} reports coords {coords!r}: expected a non-empty sequence "
                         "of ints")
    return tuple(coords)


def _core(rank: int, attributes: Mapping) -> int | None:
    core = attributes.get("core_on_chip")
    if core is not None and (not isinstance(core, int) or isinstance(core, bool) or core < 0):
        raise ValueError(f"rank {rank} reports core_on_chip {core!r}: expected an int >= 0")
    return core


def _all_or_none(what: str, values: list) -> bool:
    """True when every rank has `what`, False when none has; a mix is an error naming the ranks."""
    missing = [rank for rank, v in enumerate(values) if v is None]
    if missing and len(missing) < len(values):
        raise ValueError(f"ranks {missing} report no {what} but the other ranks do: the device "
                         "attributes do not come from one kind of plugin")
    return not missing


def mesh_order(attributes: Sequence[Mapping], mesh_shape: Sequence[int]) -> list[int]:
    """The ranks in the order a DeviceMesh of `mesh_shape` should hold them (row-major), given
    `attributes[rank]` for every rank (mappings with `coords`, `core_on_chip`, and optionally
    `process_index`, as `local_device_attributes` returns).

    The rule: sort the ranks by their device's coordinates, the last coordinate most significant
    and the first (x) least, then by `core_on_chip`. In that order the cores of one chip come
    next to each other, then the chips along x, then along y, and so on; laid row-major into the
    mesh, the last mesh dimension therefore groups the closest devices (the cores of one chip,
    then a row of chips), and the first dimension the farthest. A rank reporting no
    `core_on_chip` counts as core 0. `process_index` is not part of the key: coordinates already
    place a device, and the hosts of a slice own blocks of them.

    Where no rank reports coordinates (the CPU plugin reports none) the order is the identity,
    the order of the ranks themselves. Attributes that cannot describe one slice (a rank without
    coordinates among ranks with them, coordinates of different lengths, two ranks on one core,
    a count that does not fill the mesh) raise ValueError naming the ranks.
    """
    size = _mesh_size(mesh_shape)
    if len(attributes) != size:
        raise ValueError(f"a mesh of shape {tuple(mesh_shape)} holds {size} ranks, but "
                         f"{len(attributes)} ranks describe their devices")
    coords = [_coords(rank, a) for rank, a in enumerate(attributes)]
    cores = [_core(rank, a) for rank, a in enumerate(attributes)]
    if not _all_or_none("coords", coords):
        return list(range(size))
    _all_or_none("core_on_chip", cores)
    lengths = sorted({len(c) for c in coords})
    if len(lengths) > 1:
        raise ValueError(f"ranks report coords of different lengths {lengths}: "
                         f"{dict(enumerate(coords))}")
    keys = [(tuple(reversed(c)), core or 0) for c, core in zip(coords, cores)]
    seen: dict[tuple, int] = {}
    for rank, key in enumerate(keys):
        if key in seen:
            raise ValueError(f"ranks {seen[key]} and {rank} report the same device: coords "
                             f"{coords[rank]}, core_on_chip {key[1]}")
        seen[key] = rank
    return sorted(range(size), key=keys.__getitem__)


def _dim_groups(mesh: torch.Tensor) -> list:
    """For each mesh dimension, the group of this rank's fiber along it, its group ranks in mesh
    order. PyTorch's own DeviceMesh sorts a group's ranks (and reuses the world group for a
    dimension spanning it), so on a reordered mesh a rank's group rank would differ from its mesh
    coordinate and DTensor would place shards in the wrong order."""
    import torch.distributed as dist

    rank, groups = dist.get_rank(), []
    for dim in range(mesh.ndim):
        fibers = mesh.movedim(dim, -1).reshape(-1, mesh.shape[dim]).tolist()
        mine = None
        for ranks in fibers:  # every rank creates every group, in the same order
            group = dist.new_group(ranks, sort_ranks=False)
            if rank in ranks:
                mine = group
        groups.append(mine)
    return groups


def distributed_mesh(mesh_shape: Sequence[int], mesh_dim_names: Sequence[str] | None = None):
    """A `DeviceMesh("tpu", ...)` over the default process group, its ranks ordered by
    `mesh_order` from every rank's `local_device_attributes` (gathered with `all_gather_object`,
    which any backend serves). Every rank must call it, like any collective.

    In the identity order this is `DeviceMesh("tpu", arange(world).view(mesh_shape))`. Otherwise
    each dimension's groups are made here with their ranks in mesh order, so a rank's rank in a
    dimension's group is its coordinate along it, as DTensor expects; such a mesh's dimensions
    are named `dim_0`, `dim_1`, ... unless `mesh_dim_names` says otherwise."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh

    if not dist.is_initialized():
        raise RuntimeError("torchtpu.distributed_mesh needs the default process group: call "
                           "torch.distributed.init_process_group() first")
    shape = tuple(mesh_shape)
    size = _mesh_size(shape)
    if size != dist.get_world_size():
        raise ValueError(f"a mesh of shape {shape} holds {size} ranks, but the world has "
                         f"{dist.get_world_size()}")
    gathered: list = [None] * size
    dist.all_gather_object(gathered, local_device_attributes())
    order = mesh_order(gathered, shape)
    mesh = torch.tensor(order, dtype=torch.int).view(shape)
    names = tuple(mesh_dim_names) if mesh_dim_names is not None else None
    if order == sorted(order):
        return DeviceMesh("tpu", mesh, mesh_dim_names=names)
    names = names or tuple(f"dim_{i}" for i in range(len(shape)))
    return DeviceMesh.from_group(_dim_groups(mesh), "tpu", mesh=mesh, mesh_dim_names=names)
