"""Datapipe stages. Importing this package registers every functional name."""

from .base import Pipe, functional_pipe
from .copy_to import CopyTo
from .feature_fetcher import FeatureFetcher
from .item_sampler import ItemSampler
from .neighbor_sampler import NeighborSampler
from .layer_neighbor_sampler import LayerNeighborSampler
from .negative_sampler import UniformNegativeSampler
from .subgraph_sampler import SubgraphSampler
from .transform import Transform
from .stages import Prefetcher, SideStream, ThreadPoolMap, Timed, Waiter
from .worker import ProcessWorkers, Shard

__all__ = ["CopyTo", "FeatureFetcher", "Transform", "Pipe", "functional_pipe", "ItemSampler", "SubgraphSampler"]
__all__ += ["Prefetcher", "ProcessWorkers", "Shard", "SideStream", "ThreadPoolMap", "Timed", "Waiter"]
__all__ += ["NeighborSampler", "LayerNeighborSampler", "UniformNegativeSampler"]
