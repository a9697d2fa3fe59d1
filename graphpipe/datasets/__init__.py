"""Built-in datasets, generated or embedded in the source: no downloads.

* :func:`synthetic_node_classification`: a power-law graph of any size with planted
  communities, for benchmarks and examples.
* :func:`synthetic_mag`: a heterogeneous graph shaped like ogbn-mag (papers, authors,
  institutions, fields of study), any size, labels a relational GNN reads from the structure.
* :func:`temporal_retail`: customers, products and timestamped transactions (a
  relational benchmark's shape), with a churn task and a purchase link task split by
  time, for temporal sampling.
* :func:`karate_club`: Zachary's karate club (34 nodes), for tests and tutorials.
* :class:`OnDiskDataset`: a GraphBolt on-disk dataset directory, read as it is;
  :class:`BuiltinDataset`: GraphBolt's ``datasets/<name>`` directory of one.
* :func:`from_pyg`, :func:`from_dgl`: a PyG ``Data`` / DGL graph with its features and splits.
* :func:`ogb_node_dataset`: an OGB node-property-prediction dataset already on local disk.
"""

from graphpipe.datasets.base import NodeClassificationDataset
from graphpipe.datasets.convert import from_dgl, from_pyg
from graphpipe.datasets.ondisk import BuiltinDataset, OnDiskDataset, Task
from graphpipe.datasets.karate import karate_club
from graphpipe.datasets.ogb import ogb_node_dataset
from graphpipe.datasets.synthetic import rmat_edge_chunks, rmat_edges, synthetic_node_classification
from graphpipe.datasets.synthetic_hetero import HeteroNodeClassificationDataset, synthetic_mag
from graphpipe.datasets.temporal_retail import TemporalRetailDataset, temporal_retail

__all__ = [
    "BuiltinDataset", "HeteroNodeClassificationDataset", "NodeClassificationDataset", "OnDiskDataset", "Task", "from_dgl",
    "from_pyg", "karate_club", "ogb_node_dataset", "rmat_edge_chunks", "rmat_edges", "synthetic_mag", "synthetic_node_classification",
    "TemporalRetailDataset", "temporal_retail",
]
