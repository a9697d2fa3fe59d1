"""Where and how stages run: the DataLoader, the placement of each stage (policy), the
stages that move work (threads, pools, CUDA streams, worker processes), ``explain()``,
and the kernel compile job."""

from graphpipe.loading.loader import DataLoader
from graphpipe.loading.policy import Place, default_placement, place
from graphpipe.loading.stages import PinMemory, Prefetcher, SideStream, ThreadPoolMap, Timed, Waiter
from graphpipe.loading.workers import ProcessWorkers, Shard

__all__ = [
    "DataLoader", "Place", "PinMemory", "Prefetcher", "ProcessWorkers", "Shard", "SideStream", "ThreadPoolMap", "Timed",
    "Waiter", "default_placement", "place",
]
