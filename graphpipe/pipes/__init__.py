"""Datapipe stages. Importing this package registers every functional name."""

from .base import Pipe, functional_pipe, traverse
from .item_sampler import ItemSampler
from .subgraph_sampler import SubgraphSampler

__all__ = ["Pipe", "functional_pipe", "traverse", "ItemSampler", "SubgraphSampler"]
