"""The one place graphpipe touches torch's datapipe machinery.

Every stage subclasses :class:`Pipe` and registers a functional name with
:func:`functional_pipe`, so users chain stages as a sentence::

    ItemSampler(items, 1024).sample_neighbor(graph, [10, 5]).fetch_feature(feats, ["feat"])

and the transforms walk the chain with :func:`traverse`. If torch ever drops
``torch.utils.data.datapipes``, only this module changes.

Functional names live in graphpipe's own registry, not in torch's global
``IterDataPipe.functions``: GraphBolt and torchdata < 0.10 register the same names
(``sample_neighbor``, ``fetch_feature``, ``prefetch``...), and torch refuses a second
registration, so sharing the global table would make ``import dgl`` fail after
``import graphpipe`` (and the reverse).
"""

import functools
from typing import Callable, Dict, Type

from torch.utils.data import IterDataPipe
from torch.utils.data.graph import traverse_dps

__all__ = ["Pipe", "functional_pipe", "traverse"]


class Pipe(IterDataPipe):
    """Base of every graphpipe stage: an ``IterDataPipe`` with graphpipe's functional names.

    A stage reads its upstream from ``self.source`` and yields one item per input item,
    so its length is its source's; source stages (``ItemSampler``) define ``__len__``.
    """

    _functional_names: Dict[str, Type["Pipe"]] = {}

    def __len__(self) -> int:
        source = self.__dict__.get("source")
        if source is None:
            raise TypeError(f"{type(self).__name__} has no source and no length")
        return len(source)

    def __getattr__(self, name: str):
        stage = Pipe._functional_names.get(name)
        if stage is None:
            return super().__getattr__(name)
        return functools.partial(stage, self)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(Pipe._functional_names))


def functional_pipe(name: str) -> Callable[[Type[Pipe]], Type[Pipe]]:
    """Class decorator: ``pipe.<name>(*args)`` builds ``cls(pipe, *args)``."""

    def register(cls: Type[Pipe]) -> Type[Pipe]:
        if not (isinstance(cls, type) and issubclass(cls, Pipe)):
            raise TypeError(f"functional_pipe('{name}'): {cls!r} must be a subclass of graphpipe Pipe")
        taken = Pipe._functional_names.get(name)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise ValueError(f"functional_pipe: the name '{name}' is already taken by {taken.__qualname__}")
        Pipe._functional_names[name] = cls
        return cls

    return register


def traverse(pipe: Pipe) -> dict:
    """The pipe graph rooted at ``pipe``: ``{id: (pipe, {id: (source, {...})})}``."""
    return traverse_dps(pipe)
