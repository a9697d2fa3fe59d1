"""Pipe-graph rewrites for ``DataLoader(pipe, transforms=[...])``: functions from a pipe
graph to a new pipe graph (they live in :mod:`graphpipe.loading`).

* where each stage runs (:mod:`graphpipe.loading.policy`): :class:`Place`, the default
  placement (``default_placement``) and the one rewrite that applies a placement
  (``place``), and ``thread_pool``;
* the toolkit every rewrite is written with (:mod:`graphpipe.loading.rewrite`):
  ``stages``, ``find``, ``consumer_of``, ``rebuild``, ``replace_stage``, ``insert_after``,
  ``insert_before``;
* where each stage of a chain runs (:mod:`graphpipe.loading.explain`): as text, DOT source
  or a figure.
"""

from graphpipe.loading.policy import Place, default_placement, place, thread_pool
from graphpipe.loading.explain import describe, draw, locations, to_graphviz
from graphpipe.loading.rewrite import (
    consumer_of, consumers, find, insert_after, insert_before, rebuild, replace_stage, stages, with_source,
)

__all__ = [
    "Place", "consumer_of", "consumers", "default_placement", "describe", "draw", "find", "insert_after",
    "insert_before", "locations", "place", "rebuild", "replace_stage", "stages", "thread_pool", "to_graphviz",
    "with_source",
]
