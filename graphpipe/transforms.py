"""Pipe-graph rewrites for ``DataLoader(pipe, transforms=[...])``, re-exported from
:mod:`graphpipe.loading`: the placement (:mod:`~graphpipe.loading.policy`), the toolkit
rewrites are written with (:mod:`~graphpipe.loading.rewrite`) and where each stage runs,
as text, DOT source or a figure (:mod:`~graphpipe.loading.explain`).
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
