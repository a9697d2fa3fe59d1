"""Faults of partitioned datasets: a rank that dies or hangs mid-epoch, damaged or
missing part files, and resuming cooperative batches over parts from a checkpoint."""

import os
import time

import pytest
import torch.distributed as dist

import graphpipe as gp
from graphpipe.distributed import load_partition, partition
from graphpipe.distributed.cooperative import _REPORT_WAIT_S

from dist_harness import run_ranks, values
from test_cooperative import items
from test_partitioned import attributed_graph, full_store, node_pipe

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
    pytest.mark.usefixtures("kernels_for_child_processes"),  # the children load them from the cache
]

TIMEOUT_S = 8  # the process group's timeout in the fault tests


def untyped_parts(out_dir, num_parts):
    graph = attributed_graph("untyped")
    partition(graph, full_store(graph, "untyped"), {"train": items("untyped")}, num_parts, out_dir)
    return str(out_dir)


def failing_rank(rank, world_size, out_dir, workdir, how):
    """Cooperative node batches over this rank's part; rank 1 exits (``how="exits"``) or
    stops taking batches (``"hangs"``) after its 3rd batch, having written the time to
    ``workdir/stopped``. Returns ``(time, error message)`` of the error the others get."""
    part = load_partition(out_dir, rank, num_parts=world_size)
    source = gp.DistributedItemSampler.from_part(part, "train", 8, shuffle=True, seed=3, drop_uneven_inputs=True)
    pipe = node_pipe("untyped", part.graph, part.features, part.partition, source=source)
    try:
        for i, _ in enumerate(gp.DataLoader(pipe)):
            if rank == 1 and i == 2:
                with open(os.path.join(workdir, "stopped"), "w") as f:
                    f.write(repr(time.time()))
                if how == "hangs":  # its loader's threads stop when their queues fill
                    time.sleep(TIMEOUT_S + _REPORT_WAIT_S + 4)
                os._exit(3)
    except RuntimeError as error:
        return time.time(), str(error)
    return None, "finished"


HANG_REASON = (
    "DistributedItemSampler makes its stage groups with dist.new_group(backend=...), whose timeout is torch's default "
    "(30 min for gloo), not init_process_group's: a hung rank is found only when it exits. Fix in "
    "pipes/distributed_item_sampler.py: new_group(backend=backend, timeout=<the default group's timeout>)"
)


@pytest.mark.parametrize("how", ["exits", pytest.param("hangs", marks=pytest.mark.xfail(strict=True, reason=HANG_REASON))])
def test_a_rank_that_dies_or_hangs_is_named(how, tmp_path):
    """3 gloo ranks; rank 1 exits (or hangs) mid-epoch: ranks 0 and 2 raise an error naming
    rank 1, at once when it exits (its connections close), within the process group's
    timeout when it hangs; not a raw gloo error, not a hang."""
    out_dir = untyped_parts(tmp_path / "parts", 3)
    outcomes = run_ranks(failing_rank, 3, tmp_path, args=(out_dir, str(tmp_path), how), timeout=120, collective_timeout=TIMEOUT_S)
    assert outcomes[1] == ("error", "rank 1 died with exit code 3")
    stopped = float((tmp_path / "stopped").read_text())
    limit = (TIMEOUT_S if how == "hangs" else 0) + _REPORT_WAIT_S + 3  # measured: + 0.1 s
    for rank in (0, 2):
        status, (when, message) = outcomes[rank]
        assert status == "ok" and when is not None, (rank, outcomes[rank])
        assert message.startswith(f"graphpipe: rank {rank}: a collective (all_to_all_single) of 3 ranks failed: rank 1 did not report it"), message
        assert "restart every rank" in message
        assert 0 < when - stopped < limit, (rank, when - stopped, message)
