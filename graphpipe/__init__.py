"""graphpipe: fast, composable datapipes for sampling-based GNN training.

    import graphpipe as gp
    pipe = (gp.ItemSampler(train_set, batch_size=1024, shuffle=True)
            .sample_neighbor(graph, fanouts=[15, 10, 5])
            .fetch_feature(features, node_feature_keys=["feat"]))
    for minibatch in gp.DataLoader(pipe):
        ...
"""

from . import _numba_cache

_numba_cache.install()  # before any kernel is saved: several processes may compile at once

from . import datasets  # noqa: E402
from . import ops
from . import transforms
from .csc_graph import CSCGraph
from .feature_store import Feature, FeatureStore
from .disk_feature import DiskBasedFeature
from .cpu_cache import CPUCachedFeature
from .gpu_cache import GPUCachedFeature, gpu_cached_feature, hotness_from_degree, hotness_from_presampling
from .item_set import HeteroItemSet, ItemSet, ItemSetDict
from .loader import DataLoader
from .minibatch import CSCFormat, MiniBatch, SampledSubgraph
from .pipes import ItemSampler, Pipe, SubgraphSampler
from .pipes import LayerNeighborSampler, NeighborSampler, UniformNegativeSampler
from .pipes import CopyTo, FeatureFetcher, Transform
from .distributed import DistributedItemSampler, cooperative_exchange

__version__ = "0.1.0"

__all__ = [
    "DistributedItemSampler", "cooperative_exchange",
    "GPUCachedFeature", "gpu_cached_feature", "hotness_from_degree", "hotness_from_presampling",
    "CopyTo",
    "CPUCachedFeature",
    "DiskBasedFeature",
    "Feature",
    "FeatureFetcher",
    "FeatureStore",
    "Transform",
    "ops",
    "NeighborSampler",
    "LayerNeighborSampler",
    "UniformNegativeSampler",
    "CSCGraph",
    "CSCFormat",
    "DataLoader",
    "ItemSampler",
    "ItemSet",
    "HeteroItemSet",
    "ItemSetDict",
    "MiniBatch",
    "Pipe",
    "SampledSubgraph",
    "SubgraphSampler",
]
