"""Pure tensor functions and fused kernels: no datapipe knowledge, no global state."""

# numba reads ``np.ma`` to type every array argument, and numpy 2 imports ``numpy.ma`` on
# first use. A process whose first kernel calls run in several threads at once (a loader's
# pool) could then import it in two threads at the same time. One of them found it half
# imported and recursed until RecursionError: a gloo rank forked from a server that had
# imported graphpipe but never numpy.ma. Importing it here, in the importing thread, rules
# that out.
import numpy.ma  # noqa: F401

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
