"""Pipe-graph rewrites a ``DataLoader(pipe, transforms=[...])`` applies: functions from a
pipe graph to a new pipe graph (they live in :mod:`graphpipe.loading`).

* the toolkit every transform is written with (:mod:`graphpipe.loading.rewrite`):
  ``stages``, ``find``, ``consumer_of``, ``replace_stage``, ``insert_after``, ``insert_before``;
* the default transforms (:mod:`graphpipe.loading.policy`): ``gpu_side_streams``,
  ``overlap_stages``, ``pinned_copy``, ``process_workers(n)``, and ``thread_pool``;
* where each stage runs (:mod:`graphpipe.loading.explain`): as text, DOT source or a figure.
"""

from graphpipe.loading.policy import default_transforms, gpu_side_streams, overlap_stages, pinned_copy, process_workers, thread_pool
from graphpipe.loading.explain import describe, draw, placement, to_graphviz
from graphpipe.loading.rewrite import consumer_of, consumers, find, insert_after, insert_before, replace_stage, stages, with_source

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
