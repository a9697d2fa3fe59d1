"""The stage protocol every graphpipe pipe follows, and the functional-name registry.

Every stage subclasses :class:`Pipe` and registers a functional name with
:func:`functional_pipe`, so users chain stages as a sentence::

    ItemSampler(items, 1024).sample_neighbor(graph, [10, 5]).fetch_feature(feats, ["feat"])

A :class:`Pipe` is a ``torch.utils.data.IterableDataset`` (so ``torch.utils.data``
utilities accept it); graphpipe does not use torch's ``IterDataPipe``, whose
one-live-iterator rule made a second ``iter(pipe)`` kill the running epoch, and
whose graph walker pickled every stage and its tensors. Transforms walk the chain by
its ``.source`` links with :func:`upstream`, the one walker (also
:func:`graphpipe.transforms.graph.stages`): O(stages), nothing is copied or pickled.

Functional names live in graphpipe's own registry, not in torch's global
``IterDataPipe.functions``: GraphBolt and torchdata < 0.10 register the same names
(``sample_neighbor``, ``fetch_feature``, ``prefetch``...), and torch refuses a second
registration, so sharing the global table would make ``import dgl`` fail after
``import graphpipe`` (and the reverse).
"""

import functools
from typing import Callable, Dict, List, Type

from torch.utils.data import IterableDataset

__all__ = ["Pipe", "functional_pipe", "upstream"]


class Pipe(IterableDataset):
    """Base of every graphpipe stage: an ``IterableDataset`` with graphpipe's functional names.

    A stage reads its upstream from ``self.source`` and yields one item per input item,
    so its length is its source's; source stages (``ItemSampler``) define ``__len__``.
    Any number of iterators over one pipe may be live at once.
    """

    _functional_names: Dict[str, Type["Pipe"]] = {}

    def __len__(self) -> int:
        source = self.__dict__.get("source")
        if source is None:
            raise TypeError(f"{type(self).__name__} has no source and no length")
        return len(source)

    def __getattr__(self, name: str):
        # Only called for attributes not found the normal way.
        stage = Pipe._functional_names.get(name)
        if stage is None or name.startswith("__"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
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


def upstream(pipe) -> List[Pipe]:
    """``pipe`` and every stage upstream of it, following ``.source`` links: sink first,
    each stage once. The one walker of the pipe graph; it never copies or pickles."""
    order: List[Pipe] = []
    seen = set()
    stage = pipe
    while isinstance(stage, Pipe) and id(stage) not in seen:
        seen.add(id(stage))
        order.append(stage)
        stage = getattr(stage, "source", None)
    return order
