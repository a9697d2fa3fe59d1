"""Multi-process training: split batches over ranks, or sample one batch cooperatively.

* :class:`~graphpipe.DistributedItemSampler` (a stage, in :mod:`graphpipe.pipes`): every rank's share of the same global batches.
* :class:`Partition`: which rank owns each vertex (hash by default, or a user tensor).
* cooperative minibatching (``cooperative=True`` on samplers and ``fetch_feature``, and
  :func:`cooperative_exchange` in the model): see :mod:`graphpipe.distributed.cooperative`.
"""

from graphpipe.distributed.cooperative import CooperativeSampledSubgraph, ExchangePlan, cooperative_exchange
from graphpipe.distributed.partition import Partition

__all__ = ["CooperativeSampledSubgraph", "ExchangePlan", "Partition", "cooperative_exchange"]
