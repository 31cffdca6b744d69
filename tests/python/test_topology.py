"""torchtpu.topology: the mesh order from device attributes, and the DeviceMesh built from it."""

import datetime
import random

import pytest
import torch

from torchtpu import topology


def _chip(x, y, core=None, z=0):
    return {"coords": (x, y, z), "core_on_chip": core, "process_index": 0}


def _shuffled(devices, seed):
    """The devices handed to ranks in a shuffled order: (attributes by rank, rank of each device)."""
    ranks = list(range(len(devices)))
    random.Random(seed).shuffle(ranks)
    by_rank = [None] * len(devices)
    for device, rank in enumerate(ranks):
        by_rank[rank] = devices[device]
    return by_rank, ranks


def test_2x2_chips_fill_rows_along_x():
    # Devices listed in the order the rule sorts them (y, then x).
    devices = [_chip(0, 0), _chip(1, 0), _chip(0, 1), _chip(1, 1)]
    for seed in range(3):
        attributes, rank_of = _shuffled(devices, seed)
        order = topology.mesh_order(attributes, (2, 2))
        assert order == rank_of
        mesh = torch.tensor(order).view(2, 2)
        for y in range(2):
            assert [attributes[r]["coords"] for r in mesh[y].tolist()] == [(0, y, 0), (1, y, 0)]


def test_2x2x1_chips_with_two_cores_keep_a_chips_cores_in_the_last_dim():
    devices = [_chip(x, y, core) for y in range(2) for x in range(2) for core in range(2)]
    attributes, rank_of = _shuffled(devices, seed=7)
    order = topology.mesh_order(attributes, (2, 2, 2))
    assert order == rank_of
    mesh = torch.tensor(order).view(2, 2, 2)
    for y in range(2):
        for x in range(2):
            cell = [attributes[r] for r in mesh[y, x].tolist()]
            assert [a["coords"] for a in cell] == [(x, y, 0)] * 2
            assert [a["core_on_chip"] for a in cell] == [0, 1]
    # The same devices as a (4, 2) mesh: each row is one chip.
    rows = torch.tensor(topology.mesh_order(attributes, (4, 2))).view(4, 2)
    assert all(len({attributes[r]["coords"] for r in row}) == 1 for row in rows.tolist())


def test_the_last_coordinate_is_most_significant():
    attributes = [_chip(0, 0, z=1), _chip(0, 1, z=0), _chip(1, 0, z=0), _chip(0, 0, z=0)]
    assert topology.mesh_order(attributes, (4,)) == [3, 2, 1, 0]


def test_no_coordinates_is_the_identity():
    attributes = [{"coords": None, "core_on_chip": None, "process_index": 0}] * 4
    assert topology.mesh_order(attributes, (2, 2)) == [0, 1, 2, 3]
    # What this process's plugin reports, for every rank.
    local = topology.local_device_attributes()
    if local["coords"] is None:
        assert topology.mesh_order([local] * 3, (3,)) == [0, 1, 2]


@pytest.mark.parametrize("attributes, shape, message", [
    ([_chip(0, 0), _chip(1, 0)], (2, 2), r"shape \(2, 2\) holds 4 ranks, but 2 ranks"),
    ([_chip(0, 0), {"coords": None}], (2,), r"ranks \[1\] report no coords"),
    ([_chip(0, 0), {"coords": (1, 0)}], (2,), r"coords of different lengths \[2, 3\]"),
    ([_chip(0, 0, 0), _chip(0, 0, 0)], (2,), r"ranks 0 and 1 report the same device"),
    ([_chip(0, 0), _chip(0, 0)], (2,), r"ranks 0 and 1 report the same device"),
    ([_chip(0, 0, 0), _chip(1, 0)], (2,), r"ranks \[1\] report no core_on_chip"),
    ([_chip(0, 0), {"coords": "0,1,0"}], (2,), r"rank 1 reports coords '0,1,0'"),
    ([_chip(0, 0), {"coords": (0.5, 1, 0)}], (2,), r"rank 1 reports coords \(0.5, 1, 0\)"),
    ([_chip(0, 0), {"coords": ()}], (2,), r"rank 1 reports coords \(\)"),
    ([_chip(0, 0, -1)], (1,), r"rank 0 reports core_on_chip -1"),
    ([_chip(0, 0)], (0,), r"positive ints, got \(0,\)"),
    ([_chip(0, 0)], (), r"non-empty sequence of positive ints, got \(\)"),
    ([_chip(0, 0)], (True,), r"positive ints, got \(True,\)"),
])
def test_attributes_that_describe_no_slice_are_errors(attributes, shape, message):
    with pytest.raises(ValueError, match=message):
        topology.mesh_order(attributes, shape)


def _mesh_worker(rank, init_file):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    try:
        # This plugin's own attributes: the CPU plugin reports no coordinates, so the identity.
        local = topology.local_device_attributes()
        mesh = topology.distributed_mesh((2,), ("dp",))
        assert mesh.device_type == "tpu" and mesh.mesh_dim_names == ("dp",)
        if local["coords"] is None:
            assert mesh.mesh.tolist() == [0, 1]

        # Chips that sit the other way round: rank 1 is at x=0, so it comes first.
        topology.local_device_attributes = lambda device=None: _chip(1 - rank, 0, 0)
        mesh = topology.distributed_mesh((1, 2), ("pp", "tp"))
        assert mesh.mesh.tolist() == [[1, 0]]
        assert list(mesh.get_coordinate()) == [0, 1 - rank]
        # The dimension's group ranks follow the mesh (PyTorch's own would sort them).
        assert mesh.get_local_rank("tp") == 1 - rank
        seen = [None, None]
        dist.all_gather_object(seen, rank, group=mesh.get_group("tp"))
        assert seen == [1, 0]
        assert mesh.size(0) == 1 and mesh.get_local_rank("pp") == 0
        mesh = topology.distributed_mesh((2,))
        assert mesh.mesh.tolist() == [1, 0] and mesh.mesh_dim_names == ("dim_0",)
        assert mesh.get_local_rank() == 1 - rank
        with pytest.raises(ValueError, match=r"holds 4 ranks, but the world has 2"):
            topology.distributed_mesh((2, 2))
    finally:
        dist.destroy_process_group()


def test_distributed_mesh_orders_two_real_processes(tmp_path):
    torch.multiprocessing.spawn(_mesh_worker, args=(str(tmp_path / "init"),), nprocs=2)


def test_distributed_mesh_needs_a_process_group():
    with pytest.raises(RuntimeError, match="needs the default process group"):
        topology.distributed_mesh((1,))
