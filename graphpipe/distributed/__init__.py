"""Multi-process training: split batches over ranks, or sample one batch cooperatively.

* :class:`~graphpipe.DistributedItemSampler` (a stage, in :mod:`graphpipe.pipes`): every rank's share of the same global batches.
* :class:`Partition`: which rank owns each vertex (hash by default, or a user tensor).
* :func:`partition` / :func:`load_partition` / :func:`load_item_sets`: a dataset split
  into parts, each rank mapping only its own (:mod:`graphpipe.distributed.partitioned`).
* cooperative minibatching (``cooperative=True`` on samplers and ``fetch_feature``, and
  :func:`cooperative_exchange` in the model): see :mod:`graphpipe.distributed.cooperative`.
"""

from graphpipe.distributed.cooperative import CooperativeSampledSubgraph, ExchangePlan, cooperative_exchange
from graphpipe.distributed.partition import Partition
from graphpipe.distributed.partitioned import GraphPart, load_item_sets, load_partition, metis_assignment, partition

__all__ = [
    "CooperativeSampledSubgraph", "ExchangePlan", "GraphPart", "Partition", "cooperative_exchange", "load_item_sets", "load_partition",
    "metis_assignment", "partition",
]
