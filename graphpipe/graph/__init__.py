"""The graph: :class:`CSCGraph` (typed or untyped, in memory or memory-mapped), its
storage and its checks."""

from graphpipe.graph.csc_graph import CSCGraph

__all__ = ["CSCGraph"]
