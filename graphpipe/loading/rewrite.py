"""Find, replace, insert: the pipe-graph toolkit every rewrite is written with.

A pipe graph is the chain of stages reachable from the sink through ``.source`` links
(:func:`graphpipe.pipes.base.upstream`). Rewrites never touch the user's stages:
:func:`rebuild` shallow-copies a stage only where its upstream changed.
"""

from __future__ import annotations

import copy
from typing import Callable, Dict, List, Optional, Tuple, Type, Union

from graphpipe.pipes.base import Pipe, upstream

__all__ = [
    "stages", "find", "consumers", "consumer_of", "rebuild", "replace_stage", "insert_after", "insert_before", "with_source",
]

StageTypes = Union[Type[Pipe], Tuple[Type[Pipe], ...]]


def stages(pipe: Pipe) -> List[Pipe]:
    """Every stage of the graph of ``pipe``, each once, sink first (:func:`upstream`)."""
    return upstream(pipe)


def find(pipe: Pipe, stage_type: StageTypes) -> List[Pipe]:
    """The stages of ``pipe``'s graph that are instances of ``stage_type``, sink first."""
    return [stage for stage in upstream(pipe) if isinstance(stage, stage_type)]


def consumers(pipe: Pipe) -> Dict[int, Pipe]:
    """``{id(stage): the stage whose .source is stage}`` over ``pipe``'s graph."""
    return {id(stage.source): stage for stage in upstream(pipe) if isinstance(getattr(stage, "source", None), Pipe)}


def consumer_of(pipe: Pipe, stage: Pipe) -> Optional[Pipe]:
    """The stage whose ``.source`` is ``stage`` (None when ``stage`` is the sink)."""
    consumer = consumers(pipe).get(id(stage))
    if consumer is None and stage is not pipe:
        raise ValueError(f"consumer_of: {type(stage).__name__} is not upstream of the sink through `.source` links")
    return consumer


def with_source(stage: Pipe, source) -> Pipe:
    """A shallow copy of ``stage`` reading from ``source`` (``stage`` is unchanged)."""
    if not hasattr(stage, "source"):
        raise TypeError(
            f"cannot rewire {type(stage).__name__}: graphpipe transforms need every stage "
            f"on the rewritten path to keep its upstream in `.source`"
        )
    new = copy.copy(stage)
    new.source = source
    return new


def rebuild(pipe: Pipe, rewrite: Callable[[Pipe, Pipe], Pipe]) -> Pipe:
    """``pipe``'s graph rebuilt source first; returns the new sink.

    Each stage is replaced by ``rewrite(stage, on)``, where ``on`` is ``stage`` reading
    from the rebuilt upstream (a shallow copy, or ``stage`` itself when its upstream is
    unchanged); ``rewrite`` returns ``on``, or a stage reading from it, or one replacing it.
    """
    new: Optional[Pipe] = None
    for stage in reversed(upstream(pipe)):
        on = stage if new is None or new is stage.source else with_source(stage, new)
        new = rewrite(stage, on)
    return new


def replace_stage(pipe: Pipe, old: Pipe, new: Pipe) -> Pipe:
    """The graph of ``pipe`` with stage ``old`` replaced by ``new``; returns the new sink.

    Stages between the sink and ``old`` are shallow copies; ``pipe`` itself is unchanged.
    """
    if not any(stage is old for stage in upstream(pipe)):
        raise ValueError(f"replace_stage: {type(old).__name__} is not upstream of the sink through `.source` links")
    return rebuild(pipe, lambda stage, on: new if stage is old else on)


def insert_after(pipe: Pipe, stage: Pipe, make: Callable[[Pipe], Pipe]) -> Pipe:
    """Put ``make(stage)`` between ``stage`` and its consumer; returns the new sink.

    ``make`` gets the stage and returns the new stage reading from it, e.g.
    ``insert_after(pipe, sampler, lambda s: Prefetcher(s, 2))``.
    """
    return replace_stage(pipe, stage, make(stage))


def insert_before(pipe: Pipe, stage: Pipe, make: Callable[[Pipe], Pipe]) -> Pipe:
    """Put ``make(stage.source)`` between ``stage`` and its upstream; returns the new sink."""
    return replace_stage(pipe, stage, with_source(stage, make(stage.source)))
