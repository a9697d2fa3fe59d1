"""Per-rank memory on a partitioned dataset: after an epoch of cooperative sampling and
feature fetching, a rank holds its part (1/P of the graph and features) plus about one
batch's working set, measured as the anonymous memory it grew plus the resident pages of
the part files it mapped (``/proc/self/smaps``).

Anonymous memory is measured after ``malloc_trim(0)``, with ``MALLOC_ARENA_MAX=1``:
glibc keeps what the loader's threads free, in per-thread arenas by default, where it
fragments. Measured: 20-29 MB untrimmed growth after this epoch, of which the ranks held
3-4 MB; on one rank (batch 512) 84 MB trimmed after 16 epochs with glibc's default arenas,
9.5 MB with ``MALLOC_ARENA_MAX=1`` (32 MB with 2)."""

import ctypes
import gc
import os
import sys

import pytest
import torch
import torch.distributed as dist

import graphpipe as gp
from graphpipe.distributed import load_partition, partition

from dist_harness import run_ranks, values

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or not hasattr(ctypes.CDLL(None), "malloc_trim"),
        reason="reads /proc/self/smaps and trims glibc's heap",
    ),
    pytest.mark.usefixtures("kernels_for_child_processes"),  # the children load them from the cache
]

NUM_NODES, DEGREE, DIM = 200_000, 5, 64  # features: 51 MB of float32, 5x the graph's arrays
NUM_PARTS, BATCH_SIZE, FANOUTS = 2, 256, [5, 5]
# A rank's bytes beyond its share: the last batches and the samplers' buffers still alive
# (a batch's feature rows: 1.6 MB), heap fragmentation, and the part's graph.pt headers (a
# part's indptr is compact: a row per owned vertex, counted in its share).
WORKING_SET = 8 << 20
MB = 1 << 20


def dataset(num_edges, dim, seed=0):
    """A random graph of NUM_NODES nodes (int32 arrays, as from_coo makes them), float32
    ``[NUM_NODES, dim]`` features and 40k training nodes."""
    g = torch.Generator().manual_seed(seed)
    graph = gp.CSCGraph.from_coo(torch.randint(0, NUM_NODES, (num_edges,), generator=g),
                                 torch.randint(0, NUM_NODES, (num_edges,), generator=g), num_nodes=NUM_NODES)  # fmt: skip
    features = gp.FeatureStore({"feat": torch.rand(NUM_NODES, dim, generator=g)})
    return graph, features, {"train": gp.ItemSet(torch.randperm(NUM_NODES, generator=g)[:40_000], names="seeds")}


def anonymous_bytes(trim: bool = False) -> int:
    """This process's resident anonymous bytes (after returning free heap pages if ``trim``)."""
    gc.collect()
    if trim:
        ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:"))


def mapped_bytes(directory: str) -> dict:
    """Resident bytes of each file mapped from ``directory`` (path relative to it -> bytes)."""
    resident, path = {}, None
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's header line
                path = fields[5] if len(fields) > 5 and fields[5].startswith(directory + os.sep) else None
            elif path is not None and fields[0] == "Rss:":
                key = os.path.relpath(path, directory)
                resident[key] = resident.get(key, 0) + int(fields[1]) * 1024
    return resident


def epoch(out_dir, rank, world_size):
    """One epoch of cooperative batches with features over part ``rank``; returns the part."""
    part = load_partition(out_dir, rank, num_parts=world_size)
    source = gp.DistributedItemSampler.from_part(part, "train", BATCH_SIZE, shuffle=True, seed=1, drop_uneven_inputs=True)
    sampler = source.sample_neighbor(part.graph, FANOUTS, seed=2, cooperative=True)
    for _ in gp.DataLoader(sampler.fetch_feature(part.features, ["feat"], cooperative=True)):
        pass
    return part


def memory_rank(rank, world_size, warm_up_dir, out_dir):
    """``(anonymous bytes grown, untrimmed, {part file: resident bytes})`` over an epoch
    on part ``rank`` (the part alive), after an epoch over a small dataset of the same
    shape and dtypes (kernels loaded, the loader's threads and gloo's buffers made)."""
    epoch(warm_up_dir, rank, world_size)
    before = anonymous_bytes(trim=True)
    part = epoch(out_dir, rank, world_size)
    untrimmed = anonymous_bytes() - before
    measured = anonymous_bytes(trim=True) - before, untrimmed, mapped_bytes(os.path.realpath(out_dir))
    del part  # alive until here: its files stay mapped
    return measured


def test_a_rank_holds_its_part(tmp_path, monkeypatch):
    """P=2 ranks, 200k nodes, 1M edges, 51 MB of features (hash partition): after an epoch
    (fanouts [5, 5], 256 seeds per rank), each rank's anonymous growth plus the resident
    pages of its part's files is at most 1/P of the whole dataset plus WORKING_SET, and
    no file of the other part (nor owners.npy) is mapped."""
    graph, features, item_sets = dataset(DEGREE * NUM_NODES, DIM)
    # The whole dataset as the parts hold it: indptr and its rows' node ids (int64), indices,
    # the user's edge ids (int32), feature rows.
    whole = (4 + 8) * NUM_NODES + 4 * 2 * graph.total_num_edges + 4 * NUM_NODES * DIM
    partition(graph, features, item_sets, NUM_PARTS, tmp_path / "parts")
    partition(*dataset(20_000, 2, seed=1), NUM_PARTS, tmp_path / "warm-up")
    del graph, features
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")  # the ranks' freed memory in one heap, which malloc_trim returns
    # Spawned: a new interpreter's glibc reads MALLOC_ARENA_MAX (a fork server's read it when it started).
    results = values(run_ranks(memory_rank, NUM_PARTS, tmp_path, args=(str(tmp_path / "warm-up"), str(tmp_path / "parts")), start="spawn"))
    for rank, (anonymous, untrimmed, mapped) in enumerate(results):
        held = anonymous + sum(mapped.values())
        report = (
            f"rank {rank}: {held / MB:.1f} MB = anonymous {anonymous / MB:.1f} MB (untrimmed {untrimmed / MB:.1f}) + "
            f"mapped {({name: round(size / MB, 2) for name, size in mapped.items()})}; whole {whole / MB:.1f} MB"
        )
        print(report)
        assert set(mapped) <= {f"part-{rank}/{name}" for name in ("graph.pt", "node-feat-0.npy", "nodes.npy")}, report
        assert mapped[f"part-{rank}/node-feat-0.npy"] > 0.9 * 4 * DIM * NUM_NODES / NUM_PARTS, report  # the epoch read its rows
        assert held <= whole / NUM_PARTS + WORKING_SET, report
