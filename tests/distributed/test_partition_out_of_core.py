"""partition from the formats graphpipe reads out of core (``from_coo_files`` edge lists, an
``OnDiskDataset``), its peak memory on a mapped graph, and the owners' dtype.

The union of the parts is the input: every edge once with its user edge id (its row in
the edge file), every feature row and every item, each on its owner."""

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch

import graphpipe as gp
from graphpipe.distributed import Partition, load_partition, partition
from graphpipe.distributed.partitioned import _describe

from test_partitioned import check_items

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "datasets"))
from graphbolt_layout import write_graphbolt_dataset

NUM_PARTS = 3
REPO = os.path.dirname(os.path.dirname(os.path.abspath(gp.__file__)))  # the graphpipe the children import


def owners_for(method, num_nodes):
    """``method`` as partition takes it: "hash", or a ``[num_nodes]`` int64 tensor of owners."""
    return method if method == "hash" else torch.randint(0, NUM_PARTS, (num_nodes,), generator=torch.Generator().manual_seed(3))


def check_parts(out_dir, src, dst, node_tables, edge_tables, splits, edge_attributes=None):
    """The parts of ``out_dir`` hold every edge of the edge list ``src -> dst`` (``[E]``
    int64; user edge id = row) once, on the owner of its destination, with its
    ``edge_attributes`` (name -> ``[E]`` by row); every node row of ``node_tables`` and
    edge row of ``edge_tables`` (name -> table) on its owner; every item of ``splits``."""
    parts = [load_partition(out_dir, r, num_parts=NUM_PARTS, validate=True) for r in range(NUM_PARTS)]
    everyone = torch.arange(len(node_tables["feat"]))
    owner = parts[0].partition.owner(everyone)
    assert torch.equal(torch.cat([p.nodes for p in parts]).sort().values, everyone)
    rows = []
    for r, part in enumerate(parts):
        assert bool((owner[part.nodes] == r).all())
        part_src, part_dst = part.graph.edge_index()
        eids = part.graph.map_edge_ids(torch.arange(part.graph.total_num_edges))
        assert bool((owner[part_dst] == r).all())
        attrs = [part.graph.edge_attributes[name].double() for name in edge_attributes or {}]
        rows.append(torch.stack([eids, part_src, part_dst, *attrs], 1).double())
        for name, table in node_tables.items():
            assert torch.equal(part.features[name].read(part.nodes), table[part.nodes])
        for name, table in edge_tables.items():
            assert torch.equal(part.features["edge", None, name].read(eids), table[eids])
    rows = torch.cat(rows)
    rows = rows[rows[:, 0].argsort()]
    expected = [torch.arange(src.numel()), src, dst, *[a.double() for a in (edge_attributes or {}).values()]]
    assert torch.equal(rows, torch.stack(expected, 1).double())
    check_items(parts, splits, owner, parts[0].graph.schema)


@pytest.mark.parametrize("method", ["hash", "assignment"])
def test_partition_from_coo_files(method, tmp_path):
    """Edge lists in .npy files -> ``CSCGraph.from_coo_files`` (bounded memory, mapped) ->
    partition: the parts' union is the edge list, with the row of each edge as its id."""
    num_nodes, num_edges = 400, 5000
    g = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, num_nodes, (num_edges,), generator=g), torch.randint(0, num_nodes, (num_edges,), generator=g)
    np.save(tmp_path / "src.npy", src.numpy())
    np.save(tmp_path / "dst.npy", dst.numpy())
    graph = gp.CSCGraph.from_coo_files(tmp_path / "graph.pt", tmp_path / "src.npy", tmp_path / "dst.npy", num_nodes=num_nodes)
    feat, edge_feat = torch.rand(num_nodes, 4, generator=g), torch.rand(num_edges, 2, generator=g)
    splits = {"train": gp.ItemSet((torch.arange(0, num_nodes, 3), torch.arange(0, num_nodes, 3) % 5), names=("seeds", "labels")),
              "link": gp.ItemSet(torch.stack([src[:300], dst[:300]], 1), names="seeds")}  # fmt: skip
    store = gp.FeatureStore({"feat": feat}, {"ew": edge_feat})
    partition(graph, store, splits, NUM_PARTS, tmp_path / "parts", method=owners_for(method, num_nodes))
    check_parts(tmp_path / "parts", src, dst, {"feat": feat}, {"ew": edge_feat}, splits)


@pytest.mark.parametrize("method", ["hash", "assignment"])
def test_partition_from_ondisk_dataset(method, tmp_path):
    """A GraphBolt-layout OnDiskDataset (graph built with from_coo_files and mapped, a node
    feature mapped, edge attribute ``weight``, edge feature, three item sets) -> partition."""
    d = write_graphbolt_dataset(tmp_path / "dataset", edge_format="numpy")
    ds = gp.OnDiskDataset(tmp_path / "dataset")
    task = ds.tasks[0]
    splits = {"train": task.train_set, "validation": task.validation_set, "test": task.test_set}
    partition(ds.graph, ds.feature, splits, NUM_PARTS, tmp_path / "parts", method=owners_for(method, d.num_nodes))
    node_tables = {"feat": torch.from_numpy(d.feat), "year": d.year.reshape(-1, 1)}
    check_parts(tmp_path / "parts", torch.from_numpy(d.src), torch.from_numpy(d.dst), node_tables,
                {"feat": torch.from_numpy(d.edge_feat)}, splits, {"weight": torch.from_numpy(d.weight)})  # fmt: skip


PEAK_SCRIPT = """
import ctypes, sys
import torch
import graphpipe as gp
from graphpipe.distributed import partition

graph = gp.CSCGraph.load(sys.argv[1], mmap=True)
owners = torch.randint(0, int(sys.argv[5]), (graph.total_num_nodes,), dtype=torch.uint8)
partition(gp.CSCGraph.load(sys.argv[3], mmap=True), None, None, int(sys.argv[5]), sys.argv[4], method=owners)  # warm up
ctypes.CDLL(None).malloc_trim(0)
print("ready", flush=True)
sys.stdin.readline()
partition(graph, None, None, int(sys.argv[5]), sys.argv[2], method=owners)
"""


def anonymous_bytes(pid: int):
    """Resident anonymous bytes of process ``pid``, or None once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:")), None)
    except OSError:
        return None


def peak_growth(args) -> int:
    """How much PEAK_SCRIPT's partition grows its anonymous memory at most: sampled from
    this process every ms (a thread in the child would wait for the GIL and miss peaks)."""
    # glibc mmaps every block over 64 kB and unmaps it when freed: RssAnon is then the
    # live memory (by default freed blocks stay in the heap, hiding later growth).
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "PYTHONPATH": os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(PEAK_SCRIPT), *args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=os.path.dirname(args[0]))  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        before = peak = anonymous_bytes(child.pid)
        child.stdin.write("go\n")
        child.stdin.flush()
        while (now := anonymous_bytes(child.pid)) is not None:
            peak = max(peak, now)
            time.sleep(0.001)
        assert child.wait(timeout=60) == 0, child.stderr.read()
    finally:
        child.kill()
    return peak - before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")
def test_peak_memory_is_below_the_edges(tmp_path):
    """Partitioning a mapped graph of 200k nodes and 6M edges into 2 parts grows the
    partitioning process's anonymous memory by less than the edge arrays' bytes (indices
    and edge ids, int32: 48 MB): each part's edges go through memory-mapped scratch files
    a chunk at a time. Measured: 27 MB (mostly the 16 MiB pieces the files' CRC-32s are
    read in), 146 MB before (about 50 bytes per part edge at once)."""
    num_nodes, num_edges = 200_000, 6_000_000
    g = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, num_nodes, (num_edges,), generator=g), torch.randint(0, num_nodes, (num_edges,), generator=g)
    graph = gp.CSCGraph.from_coo(src, dst, num_nodes=num_nodes)
    edge_bytes = graph.indices.nbytes + graph.original_edge_ids.nbytes
    assert edge_bytes == 8 * num_edges
    graph.save(tmp_path / "graph.pt")
    gp.CSCGraph.from_coo(src[:1000], dst[:1000], num_nodes=num_nodes).save(tmp_path / "small.pt")
    del graph, src, dst
    grown = peak_growth([*(str(tmp_path / name) for name in ("graph.pt", "parts", "small.pt", "warm-up")), "2"])
    print(f"anonymous memory grown {grown / 2**20:.1f} MiB for {edge_bytes / 2**20:.0f} MiB of edge arrays")
    assert grown < edge_bytes
    manifest = json.loads((tmp_path / "parts" / "manifest.json").read_text())
    assert sum(p["num_edges"] for p in manifest["parts"]) == num_edges


def test_owners_are_stored_in_the_smallest_dtype(tmp_path):
    """owners.npy holds uint8 for up to 256 parts (1 byte per node, was int64); Partition
    keeps an assignment so and still answers int64 owners; an old int64 owners.npy loads."""
    assert [Partition(p, torch.zeros(3, dtype=torch.int64)).assignment.dtype for p in (2, 256, 257, 40_000)] == [
        torch.uint8, torch.uint8, torch.int16, torch.int32
    ]  # fmt: skip
    assert Partition(300, torch.tensor([299, 0])).owner(torch.tensor([0, 1])).dtype == torch.int64
    num_nodes = 500
    graph = gp.CSCGraph.from_coo(torch.randint(0, num_nodes, (3000,)), torch.randint(0, num_nodes, (3000,)), num_nodes=num_nodes)
    owners = torch.randint(0, NUM_PARTS, (num_nodes,))
    manifest = partition(graph, None, {"train": gp.ItemSet(torch.arange(num_nodes), names="seeds")}, NUM_PARTS, tmp_path, method=owners)
    stored = np.load(tmp_path / "owners.npy")
    assert stored.dtype == np.uint8 and np.array_equal(stored, owners.numpy())
    assert os.path.getsize(tmp_path / "owners.npy") == 128 + num_nodes  # the .npy header, 1 byte per node
    np.save(tmp_path / "owners.npy", owners.numpy())  # as partition wrote it before: int64
    manifest["owners"] = _describe(str(tmp_path / "owners.npy"))
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    for rank in range(NUM_PARTS):
        part = load_partition(tmp_path, rank, validate=True)
        assert part.partition.assignment.dtype == torch.uint8
        assert torch.equal(part.partition.owner(torch.arange(num_nodes)), owners)
