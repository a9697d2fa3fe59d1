"""Pure tensor functions and fused kernels: no datapipe knowledge, no global state."""

from graphpipe.ops.gather import gather_rows
from graphpipe.ops.layer_sample import LayerSample
from graphpipe.ops.neighbor_sampling import sample_neighbors
from graphpipe.ops.labor import sample_labor
from graphpipe.ops.edge_lookup import EdgeExclusion, seed_edge_exclusion
from graphpipe.ops.negative_sampling import sample_uniform_negatives
from graphpipe.ops.random import derive_key
from graphpipe.ops.unique_and_compact import unique_and_compact

__all__ = ["gather_rows", "LayerSample", "derive_key", "unique_and_compact", "sample_neighbors", "sample_labor"]
__all__ += ["EdgeExclusion", "seed_edge_exclusion", "sample_uniform_negatives"]
