"""Pipe-graph rewrites: pure functions from a pipe graph to a new pipe graph.

* :mod:`.graph`: the toolkit (``stages``, ``find``, ``consumer_of``, ``replace_stage``,
  ``insert_after``, ``insert_before``) every transform is written with.
* :mod:`.defaults`: the transforms :class:`graphpipe.DataLoader` applies
  (``gpu_side_streams``, ``overlap_stages``, ``pinned_copy``, ``process_workers(n)``) and ``thread_pool``.
* :mod:`.explain`: where each stage runs, as text, DOT source or a figure.
"""

from .defaults import default_transforms, gpu_side_streams, overlap_stages, pinned_copy, process_workers, thread_pool
from .explain import describe, draw, placement, to_graphviz
from .graph import consumer_of, consumers, find, insert_after, insert_before, replace_stage, stages, with_source

__all__ = [
    "consumer_of",
    "consumers",
    "default_transforms",
    "describe",
    "draw",
    "find",
    "gpu_side_streams",
    "insert_after",
    "insert_before",
    "overlap_stages",
    "pinned_copy",
    "placement",
    "process_workers",
    "replace_stage",
    "stages",
    "thread_pool",
    "to_graphviz",
    "with_source",
]
