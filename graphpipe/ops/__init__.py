"""Pure tensor functions and fused kernels: no datapipe knowledge, no global state."""

from .gather import gather_rows
from .layer_sample import LayerSample
from .neighbor_sampling import sample_neighbors
from .labor import sample_labor
from .edge_lookup import EdgeExclusion, seed_edge_exclusion
from .negative_sampling import sample_uniform_negatives
from .random import derive_key
from .unique_and_compact import unique_and_compact

__all__ = ["gather_rows", "LayerSample", "derive_key", "unique_and_compact", "sample_neighbors", "sample_labor"]
__all__ += ["EdgeExclusion", "seed_edge_exclusion", "sample_uniform_negatives"]
