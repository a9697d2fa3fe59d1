"""graphpipe: fast, composable datapipes for sampling-based GNN training.

    import graphpipe as gp
    pipe = (gp.ItemSampler(train_set, batch_size=1024, shuffle=True)
            .sample_neighbor(graph, fanouts=[15, 10, 5])
            .fetch_feature(features, node_feature_keys=["feat"]))
    for minibatch in gp.DataLoader(pipe):
        ...
"""

import sys

from graphpipe._internal import numba_cache
from graphpipe import datasets
from graphpipe.datasets import BuiltinDataset, OnDiskDataset
from graphpipe import ops
from graphpipe import loading, transforms
from graphpipe.graph.csc_graph import ORIGINAL_EDGE_ID, CSCGraph, fused_csc_sampling_graph
from graphpipe.graph.edge_types import etype_str_to_tuple, etype_tuple_to_str
from graphpipe.features.store import BasicFeatureStore, Feature, FeatureStore, TorchBasedFeature
from graphpipe.features.disk import DiskBasedFeature
from graphpipe.features.cpu_cache import CPUCachedFeature, cpu_cached_feature
from graphpipe.features.gpu_cache import GPUCachedFeature, gpu_cached_feature, hotness_from_degree
from graphpipe.batch.item_set import HeteroItemSet, ItemSet, ItemSetDict
from graphpipe.loading.loader import DataLoader
from graphpipe.batch.minibatch import CSCFormat, MiniBatch, SampledSubgraph
from graphpipe.batch.seed_edges import exclude_seed_edges
from graphpipe.pipes import ItemSampler, Pipe, SubgraphSampler
from graphpipe.pipes import LayerNeighborSampler, NeighborSampler, UniformNegativeSampler
from graphpipe.pipes import TemporalLayerNeighborSampler, TemporalNeighborSampler
from graphpipe.pipes import CopyTo, FeatureFetcher, Transform
from graphpipe.distributed import cooperative_exchange
from graphpipe.pipes import DistributedItemSampler, HotReuse
from graphpipe.pipes.presampling import hotness_from_presampling
from graphpipe.pipes.capabilities import UnsupportedCombination
from graphpipe._internal.allocator import retain_freed_memory

__version__ = "0.1.0"

# graphpipe's kernels save to numba's cache under a lock (several processes may compile
# them at once); numba's own classes, and so other packages' kernels, are left alone.
numba_cache.lock_saves(module for name, module in list(sys.modules.items()) if name.startswith("graphpipe."))

# GraphBolt names graphpipe has not, with what to use (README: "DGL and GraphBolt users").
_GRAPHBOLT_INSTEAD = {
    "from_dglgraph": "use graphpipe.datasets.from_dgl(graph).graph",
    "CSCFormatBase": "use graphpipe.CSCFormat",
    "SampledSubgraphImpl": "use graphpipe.SampledSubgraph",
    "CooperativeConvFunction": "use graphpipe.cooperative_exchange(minibatch, layer, h)",
}


def __getattr__(name: str):
    if name in _GRAPHBOLT_INSTEAD:
        raise AttributeError(f"module 'graphpipe' has no attribute '{name}' (GraphBolt's): {_GRAPHBOLT_INSTEAD[name]}")
    raise AttributeError(f"module 'graphpipe' has no attribute '{name}'")


__all__ = [
    "BuiltinDataset", "OnDiskDataset", "ORIGINAL_EDGE_ID",
    "DistributedItemSampler", "HotReuse", "UnsupportedCombination", "cooperative_exchange", "retain_freed_memory",
    "GPUCachedFeature", "gpu_cached_feature", "hotness_from_degree", "hotness_from_presampling",
    "CopyTo",
    "CPUCachedFeature", "cpu_cached_feature",
    "DiskBasedFeature",
    "Feature", "TorchBasedFeature", "BasicFeatureStore",
    "FeatureFetcher",
    "FeatureStore",
    "Transform",
    "ops",
    "NeighborSampler",
    "LayerNeighborSampler",
    "UniformNegativeSampler",
    "TemporalNeighborSampler",
    "TemporalLayerNeighborSampler",
    "CSCGraph", "fused_csc_sampling_graph",
    "etype_str_to_tuple",
    "etype_tuple_to_str",
    "CSCFormat",
    "DataLoader",
    "ItemSampler",
    "ItemSet",
    "HeteroItemSet",
    "ItemSetDict",
    "MiniBatch",
    "exclude_seed_edges",
    "Pipe",
    "SampledSubgraph",
    "SubgraphSampler",
]
