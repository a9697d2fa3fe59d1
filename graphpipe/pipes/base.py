"""The stage protocol every graphpipe pipe follows, and the functional-name registry.

Every stage subclasses :class:`Pipe` and registers a functional name with
:func:`functional_pipe`, so users chain stages as a sentence::

    ItemSampler(items, 1024).sample_neighbor(graph, [10, 5]).fetch_feature(feats, ["feat"])

A :class:`Pipe` is a ``torch.utils.data.IterableDataset``, not torch's ``IterDataPipe``
(whose one-live-iterator rule ends a running epoch on a second ``iter(pipe)``); the chain
is walked by its ``.source`` links with :func:`upstream`, nothing copied or pickled. The
functional names live in graphpipe's own registry: GraphBolt and torchdata < 0.10 register
the same names in torch's global table, which refuses a second registration.
"""

import inspect
import itertools
from typing import Callable, Dict, Iterator, List, Optional, Type

import torch
from torch.utils.data import IterableDataset

__all__ = ["Pipe", "ROLES", "functional_pipe", "source_stream", "upstream"]

# The values of ``Pipe.role``.
ROLES = ("source", "sampler", "fetcher", "copy", "other")


class Pipe(IterableDataset):
    """Base of every graphpipe stage: an ``IterableDataset`` with graphpipe's functional names.

    The protocol has two methods:

    * :meth:`process` (``item -> item``): a stage's per-batch work. A stage reads its
      upstream from ``self.source`` and defines only this; its length is its source's.
    * :meth:`stream` (``(epoch, start) -> iterator``): the items ``start, start + 1,
      ...`` of epoch ``epoch``. Only sources (``ItemSampler``) and the loader's
      placement stages (threads, pools, CUDA streams, worker processes:
      :mod:`graphpipe.loading.stages`) define it; for every other stage it maps
      :meth:`process` over the source's stream.

    The epoch is an argument, not a counter in the pipe: a DataLoader keeps its own, so
    any number of iterators and loaders over one pipe are live at once and independent.
    A plain ``iter(pipe)`` (outside a loader) runs the next epoch of the source's own
    counter (:meth:`next_epoch`), which no loader reads. A pipe that defines only
    ``__iter__`` (a custom source) ignores the epoch.

    **What a stage is**, declared by the class attributes and methods below (defaults
    here). The DataLoader, its default placement, its kernel compile job, ``explain()``
    and ``stats()`` read only these, never a stage's class: a stage written on this base
    gets what it declares.

    ======================  ================================================================
    :attr:`role`            "source" (makes the batches), "sampler" (samples their subgraphs),
                            "fetcher" (reads their features), "copy" (moves them to
                            :attr:`device`; the loader may set its ``non_blocking`` for pinned
                            batches) or "other"
    :attr:`thread_safe`     True: :meth:`process` may run for several batches at once, in threads
                            (the default placement may pool it); False: it must not (a pool of
                            several threads refuses it); None (not declared): one batch at a
                            time unless the user pools it (``thread_pool``)
    :attr:`collective`      each :meth:`process` call is a collective across ranks
                            (cooperative sampling): the loader runs them one at a time, in order
    :attr:`device`          where the batches it yields are (None: where its input's are)
    :attr:`seed`            the seed its random draws derive from (with the epoch and the batch
                            position), so a loader's state names it; None: it draws none
    :meth:`compile_tasks`   picklable calls compiling the numba kernels :meth:`process` runs
    :meth:`stats`           per-epoch counters for ``DataLoader.stats()`` (a fetcher's cache hit
                            rates), zeroed by :meth:`reset_stats` when an epoch starts
    :meth:`num_items`       a source's item count (a loader's state names it)
    :meth:`state_options`   the options deciding which items or samples it yields (a loader's
                            state names them: batch size, shuffle, fanouts, ...)
    :meth:`next_epoch`      a source's own epoch counter, for plain iterations
    ======================  ================================================================

    Stages that move work elsewhere (:mod:`graphpipe.loading.stages`) say where, for
    ``explain()``, ``draw()`` and ``stats()``: :meth:`upstream_location` (a thread or
    worker processes run everything upstream) or, with ``wraps_source = True`` (a pool,
    a CUDA stream), :meth:`wrapped_location`; a pool adds up its threads' work in
    :attr:`work_seconds`. Every other stage runs where its consumer pulls it.
    """

    _functional_names: Dict[str, Type["Pipe"]] = {}
    role = "other"  # one of ROLES
    thread_safe: Optional[bool] = None
    collective = False
    device: Optional[torch.device] = None
    seed: Optional[int] = None
    wraps_source = False
    work_seconds: Optional[float] = None

    def compile_tasks(self) -> List[Callable[[], None]]:
        """Picklable calls that compile (or load from numba's cache) the kernels of
        :meth:`process`, run by the loader's compile job before the first batch."""
        return []

    def stats(self) -> Dict[str, object]:
        """Counters of the epoch so far, added to this stage's row of ``DataLoader.stats()``."""
        return {}

    def reset_stats(self) -> None:
        """Zero the counters of :meth:`stats` (the loader calls it when an epoch starts)."""

    def num_items(self) -> Optional[int]:
        """How many items a source batches per epoch (None: not a source, or unknown)."""
        return None

    def state_options(self) -> Dict[str, object]:
        """The options, as plain data, that decide which items or samples it yields: a
        loader's state names them, so that resuming under other options is refused."""
        return {}

    def next_epoch(self) -> int:
        """The epoch a plain ``iter()`` of a chain from this source runs (a source with an
        epoch counter advances it; here always 0)."""
        return 0

    def upstream_location(self, here: str, new_thread: Callable[[], str]) -> str:
        """Where the stages upstream of this one run, given that this one runs ``here``
        (``new_thread()`` names a new background thread)."""
        return here

    def wrapped_location(self, here: str) -> str:
        """Where ``source.process`` runs, for a stage with ``wraps_source``."""
        raise NotImplementedError(f"{type(self).__name__} does not wrap its source")

    def wrapped_stages(self) -> List["Pipe"]:
        """The stages whose ``process`` this one runs itself, downstream first: its source
        for a stage with ``wraps_source`` (a pool over a run of stages lists them all), none
        otherwise. It pulls from the last one's source."""
        return [self.source] if self.wraps_source else []

    def label(self) -> str:
        """A short name for ``explain()``: the class, and the size of a placement stage."""
        return type(self).__name__

    def process(self, item):
        """The stage's per-batch work: one item (a MiniBatch) in, one out."""
        raise NotImplementedError(f"{type(self).__name__} has no per-batch function (it is a source)")

    def stream(self, epoch: int, start: int = 0) -> Iterator:
        """Items ``start, start + 1, ...`` of epoch ``epoch`` (``start`` resumes an epoch)."""
        if type(self).process is not Pipe.process:
            return self._processed(epoch, start)
        if type(self).__iter__ is Pipe.__iter__:
            raise TypeError(f"{type(self).__name__} defines neither process() (a stage) nor stream() (a source)")
        iterator = iter(self)  # a custom source with only __iter__: it keeps its own epochs
        for _ in range(start):
            next(iterator, None)
        return iterator

    def _processed(self, epoch: int, start: int) -> Iterator:
        items = source_stream(self.source, epoch, start)
        try:
            for item in items:
                yield self.process(item)
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def __iter__(self) -> Iterator:
        """One plain pass: the next epoch of the source's own counter (see the class doc)."""
        return self.stream(upstream(self)[-1].next_epoch())

    def __len__(self) -> int:
        source = self.__dict__.get("source")
        if source is None:
            raise TypeError(f"{type(self).__name__} has no source and no length")
        return len(source)

    def exclude_seed_edges(self, *args, **kwargs):
        """GraphBolt's ``exclude_seed_edges`` stage follows a sampler directly: see
        :meth:`graphpipe.SubgraphSampler.exclude_seed_edges`."""
        raise TypeError(
            f"{type(self).__name__}: exclude_seed_edges(...) follows a sampler stage directly "
            "(.sample_neighbor(...).exclude_seed_edges(include_reverse_edges=...)), or pass "
            "exclude_seed_edges=True to the sampler"
        )

    def __getattr__(self, name: str):
        # Only called for attributes not found the normal way.
        stage = Pipe._functional_names.get(name)
        if stage is None or name.startswith("__"):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        return _chained(self, name, stage)

    def __repr__(self) -> str:
        """The chain, source first: ``ItemSampler -> NeighborSampler -> FeatureFetcher``."""
        return " -> ".join(stage.label() for stage in reversed(upstream(self)))

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(Pipe._functional_names))


def _chained(pipe: Pipe, name: str, stage: Type[Pipe]) -> Callable:
    """``pipe.<name>``: builds ``stage(pipe, ...)``; its name, signature (without the
    source) and docstring are the stage's, so ``help(pipe.sample_neighbor)`` documents it."""

    def build(*args, **kwargs):
        return stage(pipe, *args, **kwargs)

    parameters = list(inspect.signature(stage).parameters.values())[1:]
    build.__signature__ = inspect.Signature(parameters, return_annotation=stage.__name__)
    build.__name__ = name
    build.__qualname__ = f"{type(pipe).__name__}.{name}"
    build.__doc__ = f"``{name}(...)``: append a :class:`{stage.__name__}` to this pipe.\n\n{inspect.getdoc(stage) or ''}"
    return build


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


def source_stream(source, epoch: int, start: int = 0) -> Iterator:
    """Items ``start, start + 1, ...`` of ``source``: a pipe's epoch ``epoch``; a plain
    iterable (a list) as source has no epochs and is read as it is."""
    return source.stream(epoch, start) if isinstance(source, Pipe) else itertools.islice(iter(source), start, None)


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
