"""Built-in datasets, generated or embedded in the source: no downloads.

* :func:`synthetic_node_classification`: a power-law graph of any size with planted
  communities, for benchmarks and examples.
* :func:`karate_club`: Zachary's karate club (34 nodes), for tests and tutorials.
"""

from .base import NodeClassificationDataset
from .karate import karate_club
from .synthetic import rmat_edges, synthetic_node_classification

__all__ = ["NodeClassificationDataset", "karate_club", "rmat_edges", "synthetic_node_classification"]
