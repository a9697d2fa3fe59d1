"""Datapipe stages. Importing this package registers every functional name."""

from graphpipe.pipes.base import Pipe, functional_pipe
from graphpipe.pipes.copy_to import CopyTo
from graphpipe.pipes.feature_fetcher import FeatureFetcher
from graphpipe.pipes.item_sampler import ItemSampler
from graphpipe.pipes.neighbor_sampler import NeighborSampler, TemporalNeighborSampler
from graphpipe.pipes.layer_neighbor_sampler import LayerNeighborSampler, TemporalLayerNeighborSampler
from graphpipe.pipes.negative_sampler import UniformNegativeSampler
from graphpipe.pipes.subgraph_sampler import SubgraphSampler
from graphpipe.pipes.transform import Transform
from graphpipe.pipes.distributed_item_sampler import DistributedItemSampler
from graphpipe.pipes.hot_reuse import HotReuse

__all__ = ["CopyTo", "FeatureFetcher", "Transform", "Pipe", "functional_pipe", "ItemSampler", "SubgraphSampler"]
__all__ += ["DistributedItemSampler", "HotReuse"]
__all__ += ["NeighborSampler", "LayerNeighborSampler", "UniformNegativeSampler"]
__all__ += ["TemporalNeighborSampler", "TemporalLayerNeighborSampler"]
