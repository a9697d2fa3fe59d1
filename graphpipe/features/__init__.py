"""Node and edge features: :class:`FeatureStore` over in-memory, memory-mapped and pinned
tables, :class:`DiskBasedFeature` (pread, O_DIRECT), and the CPU and GPU caches."""

from graphpipe.features.cpu_cache import CPUCachedFeature, cpu_cached_feature
from graphpipe.features.disk import DiskBasedFeature
from graphpipe.features.gpu_cache import GPUCachedFeature, gpu_cached_feature, hotness_from_degree
from graphpipe.features.store import Feature, FeatureStore

__all__ = [
    "CPUCachedFeature", "cpu_cached_feature", "DiskBasedFeature", "Feature", "FeatureStore", "GPUCachedFeature", "gpu_cached_feature",
    "hotness_from_degree",
]
