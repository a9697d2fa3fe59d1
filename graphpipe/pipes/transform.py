"""Transform: apply a user function to every item."""

from __future__ import annotations

from typing import Callable

from graphpipe.pipes.base import Pipe, functional_pipe

__all__ = ["Transform"]


@functional_pipe("transform")
class Transform(Pipe):
    """Yield ``fn(item)`` for every item of ``source`` (e.g. ``MiniBatch.to_pyg``).

    Unlike torch's ``map``, a graphpipe stage with its own type, so that pipe-graph
    passes can find it.
    """

    def __init__(self, source: Pipe, fn: Callable):
        super().__init__()
        if not callable(fn):
            raise TypeError(f"Transform: `fn` must be callable, got {type(fn).__name__}")
        self.source = source
        self.fn = fn

    def apply(self, item):
        """``fn(item)``."""
        return self.fn(item)

    def process(self, item):
        """The per-batch work of the stage protocol: :meth:`apply` (a subclass overriding it is honoured)."""
        return self.apply(item)
