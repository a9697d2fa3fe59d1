"""Where and how stages run: the DataLoader, the placement stages (threads, pools, CUDA
streams, worker processes), the rewrites that insert them, the planner, ``explain()``,
and the kernel compile job."""

from graphpipe.loading.loader import DataLoader
from graphpipe.loading.stages import Prefetcher, SideStream, ThreadPoolMap, Timed, Waiter
from graphpipe.loading.workers import ProcessWorkers, Shard

__all__ = ["DataLoader", "Prefetcher", "ProcessWorkers", "Shard", "SideStream", "ThreadPoolMap", "Timed", "Waiter"]
