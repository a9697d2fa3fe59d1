"""DataLoader: iterates a pipe (later: after rewriting it with transforms)."""

from __future__ import annotations

from .pipes.base import Pipe

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate the MiniBatches of ``pipe``; each ``iter()`` is one epoch."""

    def __init__(self, pipe: Pipe):
        if not isinstance(pipe, Pipe):
            raise TypeError(f"DataLoader: `pipe` must be a graphpipe pipe (IterDataPipe), got {type(pipe).__name__}")
        self.pipe = pipe

    def __iter__(self):
        return iter(self.pipe)

    def __len__(self) -> int:
        return len(self.pipe)
