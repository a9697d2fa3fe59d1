"""DataLoader: rewrites a plain pipe so its stages overlap, iterates it, and owns its edges."""

from __future__ import annotations

import threading
import time
import warnings
import weakref
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from torch.utils.data import IterableDataset, get_worker_info

from graphpipe.pipes.base import Pipe, upstream
from graphpipe.loading.compile import compile_kernels
from graphpipe.loading.stages import Timed
from graphpipe.loading.workers import ProcessWorkers, workers_rerun_main
from graphpipe._internal.checks import check_bool, check_int
from graphpipe.loading.policy import Placement, default_placement, kernels_thread_safe, place
from graphpipe.loading.explain import MAIN, describe, draw, locations, to_graphviz
from graphpipe.loading.rewrite import find, rebuild

__all__ = ["DataLoader"]


class DataLoader(IterableDataset):
    """Iterate the MiniBatches of ``pipe`` after rewriting it; each ``iter()`` is one epoch.

    Args:
        pipe: the chain as written, never modified: the loader runs a rewritten copy
            (:attr:`rewritten`, with a timer after each stage) and counts its own epochs,
            so several loaders and plain iterations over one pipe are independent.
        num_workers: with the default placement, run the chain before ``fetch_feature``
            (and before a collective stage or a copy to a CUDA device) in this many worker
            processes (for Python-heavy samplers); GraphBolt's second positional argument.
        transforms: ``None``: run each stage where ``default_placement`` says
            (:attr:`placement`). Else functions ``pipe -> pipe`` applied in order
            (:mod:`graphpipe.transforms`); ``[]`` runs the chain as written.
        persistent_workers, overlap_feature_fetch, overlap_graph_fetch, max_uva_threads:
            GraphBolt's DataLoader options, checked and otherwise ignored: the workers
            persist, the placement overlaps the stages, the UVA gather sizes itself.

    Batches come in the order and with the content of the plain chain. A new ``iter()``
    ends an unfinished epoch (its iterator then raises RuntimeError: one epoch at a time,
    unlike torch's DataLoader); leaving the loop stops the epoch's threads, and
    :meth:`close`, ``del`` or garbage collection stop the worker processes too, waiting
    about 2 s for a batch in progress (:mod:`graphpipe.loading.stages`). A background
    stage's exception is re-raised in the loop with its original traceback.

    :meth:`state_dict` / :meth:`load_state_dict` (torchdata's ``Stateful``) resume a
    restarted process (same pipe, same seeds) bit for bit, with or without workers;
    ``StatefulDataLoader(loader, batch_size=None)`` (``num_workers`` here, not there)
    saves and resumes through them.
    """

    def __init__(
        self,
        pipe: Pipe,
        num_workers: int = 0,
        *,
        transforms: Optional[Sequence[Callable[[Pipe], Pipe]]] = None,
        persistent_workers: bool = True,
        overlap_feature_fetch: bool = True,
        overlap_graph_fetch: bool = False,
        max_uva_threads: Optional[int] = None,
    ):
        self._epoch = None
        self._starting = threading.Lock()
        self._next = (0, 0)  # (epoch, first batch) of the next iter()
        self._live: Optional[List[int]] = None  # [epoch, batches yielded] of the running epoch
        self._workers: List[ProcessWorkers] = []
        if not isinstance(pipe, Pipe):
            raise TypeError(f"DataLoader: `pipe` must be a graphpipe pipe, got {type(pipe).__name__}")
        check_int(num_workers, "num_workers", "DataLoader", minimum=0)
        for arg, value in (("persistent_workers", persistent_workers), ("overlap_feature_fetch", overlap_feature_fetch), ("overlap_graph_fetch", overlap_graph_fetch)):
            check_bool(value, arg, "DataLoader", " (GraphBolt's flag; graphpipe's workers persist and its stages overlap by the placement)")
        if max_uva_threads is not None:
            check_int(max_uva_threads, "max_uva_threads", "DataLoader", minimum=1)
        if transforms is not None and not isinstance(transforms, (list, tuple)):
            raise TypeError(
                f"DataLoader: `transforms` must be a list of functions pipe -> pipe (e.g. [thread_pool(...)]), got "
                f"{transforms!r}"
            )
        if transforms is not None and num_workers:
            raise ValueError(
                "DataLoader: `num_workers` applies to the default placement; with an explicit `transforms` list, put "
                "`lambda pipe: place(pipe, default_placement(pipe, num_workers))` (graphpipe.transforms) in it"
            )
        self.pipe = pipe
        # Where each stage of `pipe` runs (None when `transforms` rewrite the chain instead).
        self.placement: Optional[Placement] = None if transforms is not None else default_placement(pipe, num_workers)
        self.transforms: List[Callable[[Pipe], Pipe]] = list(transforms or [])
        chain = place(pipe, self.placement) if self.placement is not None else _transformed(pipe, self.transforms)
        # The chain as run; the Timed after the sink measures the training loop's wait.
        self.rewritten: Pipe = _with_timers(chain)
        self._workers = find(self.rewritten, ProcessWorkers)
        # A script without a __main__ guard gets workers that skip it (workers_rerun_main),
        # started now, from the main thread: they hide the script from multiprocessing.
        for workers in self._workers:
            if not workers_rerun_main(workers.num_workers, workers.source):
                workers.start(rerun_main=False)
        # The stages' kernels, compiled (or loaded from numba's cache) from now on, in a daemon thread.
        self.compile_job = compile_kernels(self.rewritten, background=kernels_thread_safe())
        self._epoch_span = [0.0, 0.0]

    def __iter__(self) -> "_Epoch":
        if get_worker_info() is not None:
            raise RuntimeError(
                "graphpipe.DataLoader is iterated inside a worker process of a torch DataLoader: wrap it with "
                "num_workers=0 there (e.g. StatefulDataLoader(loader, batch_size=None)); graphpipe runs its own "
                "threads, and worker processes with DataLoader(pipe, num_workers=...)"
            )
        with self._starting:  # two threads' iter() at once: the later one ends the earlier one's epoch
            if not all(workers.running() for workers in self._workers):
                # Here, in the main thread: the epoch starts the processes from a loader thread.
                for workers in self._workers:
                    workers.rerun_main = workers_rerun_main(workers.num_workers, workers.source)
            self._end_epoch("a new iter(loader)")
            self._live = None  # an epoch left unfinished is over: state_dict() gives the next one
            if self._next == (0, 0):
                _note_epoch_zero(self)
            epoch = _Epoch(self)
            self._epoch = weakref.ref(epoch)
            return epoch

    def _end_epoch(self, by: Optional[str] = None) -> None:
        """End the current epoch and stop its threads (worker processes stay for the next
        epoch); ``by``: what ended it, for the error its iterator then raises."""
        epoch = self._epoch() if self._epoch is not None else None
        self._epoch = None
        if epoch is not None:
            epoch.close(by)

    def state_dict(self) -> Dict:
        """Where the loader is, and what it runs: plain data (ints, strings, lists).

        ``epoch`` and ``batches_yielded``: inside an epoch, also after leaving its loop
        (``break``, an exception) until the next ``iter()``, that epoch and the batches the
        loop has taken so far (resuming yields the next one); between epochs, the next
        epoch and 0. ``items`` (the ItemSampler's item count), ``batches`` (per epoch),
        ``stages`` (the pipe's stages as written, source first), ``seeds`` (``(stage,
        seed)`` of the stages with one) and ``options`` (``(stage, options)``: batch size,
        shuffle, ranks, fanouts, ...) identify the pipe: :meth:`load_state_dict` checks them.
        """
        epoch, batches = self._live if self._live is not None else self._next
        return {"epoch": epoch, "batches_yielded": batches, **self._identity()}

    def _identity(self) -> Dict:
        """The entries of :meth:`state_dict` that say which pipe it is from."""
        stages = list(reversed(upstream(self.pipe)))  # source first
        options = [(type(stage).__name__, stage.state_options()) for stage in stages]
        try:
            batches = len(self.pipe)
        except TypeError:  # a custom source without a length
            batches = None
        return {
            "items": stages[0].num_items(),
            "batches": batches,
            "stages": [stage.label() for stage in stages],
            "seeds": [[type(stage).__name__, stage.seed] for stage in stages if stage.seed is not None],
            "options": [[name, declared] for name, declared in options if declared],
        }

    def load_state_dict(self, state: Dict) -> None:
        """Make the next ``iter()`` resume where ``state`` (from :meth:`state_dict`) was.

        Ends an unfinished epoch. ``state`` must come from this pipe: the same items,
        batches per epoch, stages, seeds (pass ``seed=`` to the ItemSampler and samplers,
        or ``torch.manual_seed`` before building them) and options (batch size, shuffle,
        ranks, fanouts, ...), and a position inside an epoch; a ValueError says what differs.
        """
        where = "DataLoader.load_state_dict"
        if not isinstance(state, dict):
            raise TypeError(f"{where}: `state` must be a dict from DataLoader.state_dict(), got {type(state).__name__}")
        mine = self._identity()
        missing = [key for key in _STATE_KEYS if key not in state]
        unknown = [key for key in state if key not in _STATE_KEYS]
        if missing or unknown:
            problems = ([f"lacks {missing}"] if missing else []) + ([f"has unknown keys {unknown}"] if unknown else [])
            raise ValueError(
                f"{where}: `state` {' and '.join(problems)}; a state from DataLoader.state_dict() has the keys "
                f"{list(_STATE_KEYS)}"
            )
        differs = [
            _difference(key, state[key], mine[key]) for key in mine if _plain(state[key]) != _plain(mine[key])
        ]
        if differs:
            raise ValueError(
                f"{where}: the state is from another pipe ({'; '.join(differs)}); resume with the pipe it was saved "
                f"from: the same items, stages, seeds (seed=... on the ItemSampler and the samplers) and options"
            )
        per_epoch = mine["batches"]
        batches = check_int(state["batches_yielded"], "state['batches_yielded']", where, minimum=0)
        if per_epoch is not None and batches > per_epoch:
            raise ValueError(
                f"{where}: state['batches_yielded'] is {batches}, past the end of an epoch of {per_epoch} batches"
            )
        # Batch i of epoch e has batch_index e * per_epoch + i, an int64 in the samplers' keys.
        last_epoch = (2**63 - 1) // max(per_epoch or 1, 1) - 1
        epoch = check_int(state["epoch"], "state['epoch']", where, minimum=0)
        if epoch > last_epoch:
            raise ValueError(
                f"{where}: state['epoch'] is {epoch}; with {per_epoch or 1} batches per epoch, batch indexes "
                f"(epoch * batches + batch) fit in int64 up to epoch {last_epoch}"
            )
        self._end_epoch("load_state_dict()")
        self._live = None
        self._next = (epoch, batches)

    def close(self) -> None:
        """End the current epoch, if any, and stop every thread and worker process."""
        self._end_epoch()
        for workers in self._workers:
            workers.close()

    def __del__(self):
        """Stop the epoch's threads (an iterator still referenced restarts them if used) and
        the worker processes; inside the garbage collector nothing waits for them (nor for
        a loader whose constructor was called with arguments it does not take)."""
        epoch = self._epoch() if getattr(self, "_epoch", None) is not None else None
        if epoch is not None:
            epoch.pause()
        for workers in getattr(self, "_workers", ()):
            workers.close()

    def __len__(self) -> int:
        return len(self.pipe)

    @property
    def dataset(self) -> range:
        """``range(number of items a source batches per epoch)``, as PyG's loaders' ``dataset``
        (``len(loader.dataset)``: the seed nodes or pairs of an epoch)."""
        count = upstream(self.pipe)[-1].num_items()
        if count is None:
            source = type(upstream(self.pipe)[-1]).__name__
            raise TypeError(f"DataLoader.dataset: the pipe's source {source} does not say how many items it batches")
        return range(count)

    def __repr__(self) -> str:
        """The chain as written, then as run (``explain()`` says more)."""
        return f"DataLoader({self.pipe!r}), as run:\n{describe(self.rewritten)}"

    def explain(self) -> str:
        """The pipe before and after rewriting, where each stage runs, and what placed it."""
        if self.placement is not None:
            written = reversed(upstream(self.pipe))
            moved = [f"{stage.label()} {where}" for stage, where in zip(written, self.placement) if where.kind != "inline"]
            placed_by = f"Placement (the default policy): {', '.join(moved) or 'every stage inline'}"
        else:
            placed_by = f"Transforms: {', '.join(_name(transform) for transform in self.transforms) or 'none'}"
        lines = ["Pipe as written:", describe(self.pipe), placed_by, "Pipe as run:", describe(self.rewritten)]
        return "\n".join([*lines, f"  -> your training loop runs in: {MAIN}"])

    def to_graphviz(self) -> str:
        """Graphviz DOT source of the pipe as run (render with ``graphviz.Source``)."""
        return to_graphviz(self.rewritten)

    def draw(self, ax=None):
        """A matplotlib figure of the pipe as run, stages coloured by where they run."""
        return draw(self.rewritten, ax)

    def stats(self) -> Dict[str, Dict]:
        """Per-stage time of the last (or current) epoch, upstream first, then ``"consumer"``.

        Each row: ``where`` the stage runs, ``batches`` it passed on, ``work_s`` seconds
        spent in its own per-batch work (upstream stages excluded; for a thread pool the
        sum over its threads), ``wait_s`` seconds its consumer waited on it at a thread,
        pool or process boundary (large = this side of the boundary is the bottleneck).
        The ``"consumer"`` row is your loop: ``work_s`` is the training step outside the
        loader, ``wait_s`` the time spent waiting for batches. A fetcher reading cached
        features (CPU or GPU cache) adds ``cache_hit_rate``: ``{"node/feat": rate}`` over
        the epoch, unless it runs in worker processes (each has a cache of its own).
        """
        where = locations(self.rewritten)
        elsewhere = {id(stage) for workers in find(self.rewritten, ProcessWorkers) for stage in upstream(workers.source)}
        rows: Dict[str, Dict] = {}
        for timer in reversed(find(self.rewritten, Timed)):  # each right after the stage it times, upstream first
            stage = timer.source
            label, row = _stats_row(stage, timer, where, id(stage) not in elsewhere)
            key, n = label, 1
            while key in rows:
                n += 1
                key = f"{label}#{n}"
            rows[key] = row
        start, end = self._epoch_span
        waited = self.rewritten.seconds
        elapsed = (end if end is not None else time.perf_counter()) - start
        rows["consumer"] = {"where": MAIN, "batches": self.rewritten.batches, "work_s": elapsed - waited, "wait_s": waited}
        return rows


# pipe -> (the first DataLoader to start its epoch 0, as a weak reference, and how it ran the
# pipe); the pipes warned of.
_EPOCH_ZERO_BY: "weakref.WeakKeyDictionary[Pipe, tuple]" = weakref.WeakKeyDictionary()
_WARNED: "weakref.WeakSet[Pipe]" = weakref.WeakSet()


def _note_epoch_zero(loader: DataLoader) -> None:
    """Warn, once per pipe, when a second DataLoader that runs a pipe as the first one did
    starts its epoch 0: a script that builds its loader inside the epoch loop (GraphBolt's
    and torch's reshuffle then) would train on epoch 0's batches again and again. Loaders
    placed differently (comparing placements) are not warned of."""
    how = (loader.placement, tuple(id(transform) for transform in loader.transforms))
    try:
        first, first_how = _EPOCH_ZERO_BY.setdefault(loader.pipe, (weakref.ref(loader), how))
    except TypeError:  # a pipe of yours that is not hashable (it defines __eq__): not tracked
        return
    if first() is not loader and first_how == how and loader.pipe not in _WARNED:
        _WARNED.add(loader.pipe)
        warnings.warn(
            "DataLoader: another DataLoader already ran epoch 0 of this pipe, and this one starts at epoch 0 too: it "
            "yields the same batches (order and samples). To train for several epochs, keep one DataLoader across "
            "them (a loader counts its own epochs, so that a run resumes exactly)",
            stacklevel=3,
        )


def _stats_row(stage: Pipe, timer: Timed, where: Dict[int, str], here: bool) -> Tuple[str, Dict]:
    """The label and row of :meth:`DataLoader.stats` of ``stage``, timed by ``timer``; with
    its own ``stats()`` if it runs in this process (``here``)."""
    located, label = stage, stage.label()
    pulled = stage.wrapped_stages()[-1].source if stage.wraps_source else getattr(stage, "source", None)
    if isinstance(pulled, Pipe) and where[id(pulled)] != where[id(stage)]:
        # A boundary (a background thread, worker processes): its timer is the wait.
        work, wait = 0.0, timer.seconds
    else:
        # Timers are inclusive of same-thread upstream stages: subtract the upstream's.
        upstream_timer = next((s for s in upstream(getattr(stage, "source", None)) if isinstance(s, Timed)), None)
        own = timer.seconds - (upstream_timer.seconds if upstream_timer is not None else 0.0)
        work, wait = own, 0.0
        if stage.wraps_source:
            wrapped = " + ".join(inner.label() for inner in reversed(stage.wrapped_stages()))
            located, label = stage.source, f"{wrapped} in {label}"
            # A wrapper whose work runs in other threads (a pool) adds it up in
            # work_seconds; its own timer is then the wait for results.
            if stage.work_seconds is not None:
                work, wait = stage.work_seconds, own
    row = {"where": where[id(located)], "batches": timer.batches, "work_s": work, "wait_s": wait}
    for inner in (stage.wrapped_stages() or [stage]) if here else ():
        row.update(inner.stats())
    return label, row


_STATE_KEYS = ("epoch", "batches_yielded", "items", "batches", "stages", "seeds", "options")


def _same_stages(saved, mine: list) -> bool:
    """Whether ``saved`` (a state's ``options``) lists the stages of ``mine``, as ``[stage, {options}]``."""
    return isinstance(saved, list) and len(saved) == len(mine) and all(
        isinstance(entry, (list, tuple)) and len(entry) == 2 and entry[0] == stage and isinstance(entry[1], dict)
        for entry, (stage, _) in zip(saved, mine)
    )


def _difference(key: str, saved, mine) -> str:
    """What differs between ``saved`` and ``mine``, the entries ``key`` of two states; for
    ``options`` of the same stages, only the options that differ."""
    if key == "options" and _same_stages(saved, mine):
        changed = [
            f"{stage} {name}: the state has {old.get(name)!r}, this loader {new.get(name)!r}"
            for (stage, old), (_, new) in zip(saved, mine)
            for name in dict.fromkeys([*old, *new])
            if _plain(old.get(name)) != _plain(new.get(name))
        ]
        return f"options: {'; '.join(changed)}"
    return f"{key}: the state has {saved!r}, this loader {mine!r}"


def _plain(value):
    """``value`` with tuples as lists (a state saved as JSON, or by an older pickle, compares equal)."""
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


class _Epoch:
    """The iterator ``iter(loader)`` returns: one epoch, started by its first ``next()``
    (an iterator that yielded nothing took no epoch: the next ``iter()`` runs it again).

    It holds what it runs, not the loader: when the loader is gone the epoch's threads
    stop, and a later ``next()`` starts them again at the same batch. So ``for mb in
    DataLoader(pipe)`` runs as usual, and an abandoned iterator holds no threads.
    """

    def __init__(self, loader: DataLoader):
        self._loader = weakref.ref(loader)
        self._chain = loader.rewritten
        self._live = list(loader._next)  # [epoch, batches yielded], for state_dict()
        self._span = [time.perf_counter(), None]  # perf_counter seconds, for stats()
        self._batches = None  # the generator running the chain, while it runs
        self._started = False
        self._ended = False
        self._ended_by: Optional[str] = None  # what ended it before its end, if not close()
        self._advancing = threading.Lock()  # held by the thread in next()

    def __iter__(self) -> "_Epoch":
        return self

    def __next__(self):
        if not self._advancing.acquire(blocking=False):  # the generator would refuse, and the epoch end with it
            raise RuntimeError("DataLoader: another thread is in next() of this epoch's iterator; iterate it from one thread")
        try:
            return self._next()
        finally:
            self._advancing.release()

    def _next(self):
        if self._ended and self._batches is not None:  # ended by another thread while running here
            self.pause()
        if self._batches is None:
            if self._ended_by is not None:
                raise RuntimeError(
                    f"DataLoader: this epoch's iterator was ended by {self._ended_by}; a loader runs one epoch at a "
                    f"time (unlike torch's DataLoader): to look at a batch inside the loop, keep one from the loop"
                )
            if self._ended:
                raise StopIteration
            self._batches = self._start()
        try:
            return next(self._batches)
        except BaseException:  # the end, a stage's error or an interrupt: the generator is done
            self._ended, self._batches = True, None
            raise

    def _start(self):
        loader = self._loader()
        if loader is not None:
            if not self._started:
                loader._next = (self._live[0] + 1, 0)
                for stage in upstream(self._chain):
                    stage.reset_stats()
                self._span = loader._epoch_span = [time.perf_counter(), None]
            loader._live = self._live
        self._started = True
        return _batches(self._loader, self._chain, self._live, self._span)

    def pause(self) -> None:
        """Stop the threads; the next ``next()`` starts them again at the same batch."""
        batches, self._batches = self._batches, None
        if batches is not None:
            try:
                batches.close()
            except ValueError:  # running now (a finalizer called from inside it): let it run
                self._batches = batches

    def close(self, by: Optional[str] = None) -> None:
        """End the epoch: stop the threads; ``next()`` raises StopIteration, or RuntimeError
        naming ``by`` (what ended it) when it had batches left."""
        if not self._ended:
            self._ended_by = by
        self._ended = True
        self.pause()


def _batches(loader_ref, chain: Pipe, live: List[int], span: list):
    """The batches of ``chain`` from the position ``live`` (counted on) to the end of its
    epoch, then the end of ``span``. The loader is reached through ``loader_ref`` only,
    and never held across a ``yield`` (see :class:`_Epoch`)."""
    iterator = chain.stream(live[0], live[1])
    try:
        for item in iterator:
            live[1] += 1
            yield item
        loader = loader_ref()
        if loader is not None and loader._live is live:
            loader._live = None  # finished: state_dict() gives the next epoch
    finally:
        iterator.close()
        span[1] = time.perf_counter()


def _transformed(pipe: Pipe, transforms: Sequence[Callable[[Pipe], Pipe]]) -> Pipe:
    for transform in transforms:
        if not callable(transform):
            raise TypeError(f"DataLoader: every transform must be a function pipe -> pipe, got {transform!r}")
        pipe = transform(pipe)
        if not isinstance(pipe, Pipe):
            raise TypeError(f"DataLoader: transform {_name(transform)} returned {type(pipe).__name__}, not a pipe")
    return pipe


def _name(transform) -> str:
    return getattr(transform, "__name__", repr(transform))


def _with_timers(pipe: Pipe) -> Pipe:
    """A copy of ``pipe`` with a :class:`Timed` after every stage but those a stage wraps
    (which it does not iterate); the source stage is shared."""
    wrapped = {id(inner) for stage in upstream(pipe) for inner in stage.wrapped_stages()}
    return rebuild(pipe, lambda stage, on: on if id(stage) in wrapped else Timed(on))
