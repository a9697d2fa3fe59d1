"""What flows through a pipe: :class:`ItemSet` (the training items), :class:`MiniBatch` and
its :class:`SampledSubgraph` layers, and their PyG and DGL forms."""

from graphpipe.batch.item_set import HeteroItemSet, ItemSet, ItemSetDict
from graphpipe.batch.minibatch import CSCFormat, MiniBatch, SampledSubgraph

__all__ = ["CSCFormat", "HeteroItemSet", "ItemSet", "ItemSetDict", "MiniBatch", "SampledSubgraph"]
