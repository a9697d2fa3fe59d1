"""DataLoader: rewrites a plain pipe so its stages overlap, iterates it, and owns its edges."""

from __future__ import annotations

import time
import weakref
from typing import Callable, Dict, List, Optional, Sequence

from .pipes.base import Pipe, upstream
from .pipes.stages import Timed
from .pipes.worker import ProcessWorkers
from .validation import check_int
from .transforms.defaults import default_transforms
from .transforms.explain import MAIN, describe, draw, placement, to_graphviz
from .transforms.graph import find, stages, with_source

__all__ = ["DataLoader"]


class DataLoader:
    """Iterate the MiniBatches of ``pipe`` after rewriting it; each ``iter()`` is one epoch.

    Args:
        pipe: the chain as written, e.g.
            ``ItemSampler(...).sample_neighbor(...).fetch_feature(...)``. It is never
            modified: the loader runs a rewritten copy (:attr:`rewritten`: the
            transforms' result with a timer after each stage, for :meth:`stats`) and
            counts its own epochs, so several loaders (and plain iterations) over one
            pipe are independent.
        transforms: functions ``pipe -> pipe`` applied in order (see
            :mod:`graphpipe.transforms`). ``None``: :func:`default_transforms`, which
            overlaps sampling, feature fetching, host-to-device copies and the training
            step. ``[]``: run the chain as written.
        num_workers: with the default transforms, run the chain before
            ``fetch_feature`` in this many worker processes (for Python-heavy samplers).

    The loader owns the edges: starting an epoch ends an unfinished one; leaving the
    loop (``break``, an exception, KeyboardInterrupt) stops the epoch's threads; worker
    processes (``num_workers``) serve every epoch and stop at :meth:`close`, ``del`` or
    garbage collection, which stop the threads too. Stopping waits at most about 2 s
    for a batch in progress: a thread still in a long kernel then is left behind with a
    warning (a daemon thread) and a busy worker process is terminated, so Ctrl-C always
    gets through. An exception in a background stage is re-raised in the loop with its
    original traceback. Batches come in the same order with the same content as from
    the plain chain.

    Resuming: :meth:`state_dict` / :meth:`load_state_dict` (the ``Stateful`` protocol of
    torchdata's ``StatefulDataLoader``). The state is the epoch and how many of its
    batches the loop has taken; every random number of a batch derives from the stages'
    seeds, the epoch and the batch's position, so a process restarted from a checkpoint
    (same pipe, same seeds) yields the rest of that epoch and all later epochs bit for bit
    as an uninterrupted run would, with or without worker processes.
    """

    def __init__(self, pipe: Pipe, transforms: Optional[Sequence[Callable[[Pipe], Pipe]]] = None, num_workers: int = 0):
        self._epoch = None
        self._next = (0, 0)  # (epoch, first batch) of the next iter()
        self._live: Optional[List[int]] = None  # [epoch, batches yielded] of the running epoch
        self._workers: List[ProcessWorkers] = []
        if not isinstance(pipe, Pipe):
            raise TypeError(f"DataLoader: `pipe` must be a graphpipe pipe, got {type(pipe).__name__}")
        check_int(num_workers, "num_workers", "DataLoader", minimum=0)
        if transforms is None:
            transforms = default_transforms(num_workers)
        elif num_workers:
            raise ValueError(
                "DataLoader: `num_workers` applies to the default transforms; with an explicit `transforms` "
                "list, put graphpipe.transforms.process_workers(n) in it"
            )
        self.pipe = pipe
        self.transforms: List[Callable[[Pipe], Pipe]] = list(transforms)
        rewritten = pipe
        for transform in self.transforms:
            if not callable(transform):
                raise TypeError(f"DataLoader: every transform must be a function pipe -> pipe, got {transform!r}")
            rewritten = transform(rewritten)
            if not isinstance(rewritten, Pipe):
                raise TypeError(f"DataLoader: transform {_name(transform)} returned {type(rewritten).__name__}, not a pipe")
        # The chain as run. The Timed after the sink measures the time the training loop
        # waits for batches.
        self.rewritten: Pipe = _with_timers(rewritten)
        self._workers = find(self.rewritten, ProcessWorkers)
        self._epoch_span = [0.0, 0.0]

    def __iter__(self):
        self._end_epoch()
        epoch, start = self._next
        self._next = (epoch + 1, 0)
        epoch = self._run_epoch(epoch, start)
        # A weak reference: when the loop drops its iterator (break, exception), the
        # epoch is collected and its `finally` stops the background work right away.
        self._epoch = weakref.ref(epoch)
        return epoch

    def _run_epoch(self, epoch: int, start: int):
        for stage in find(self.rewritten, Timed):
            stage.reset()
        span = self._epoch_span = [time.perf_counter(), None]
        live = self._live = [epoch, start]
        iterator = self.rewritten.stream(epoch, start)
        try:
            for item in iterator:
                live[1] += 1
                yield item
        finally:
            iterator.close()
            span[1] = time.perf_counter()
            if self._live is live:
                self._live = None

    def _end_epoch(self) -> None:
        """Stop the current epoch's threads (worker processes stay for the next epoch)."""
        epoch = self._epoch() if self._epoch is not None else None
        self._epoch = None
        if epoch is not None:
            epoch.close()

    def state_dict(self) -> Dict:
        """Where the loader is: ``{"epoch", "batches_yielded", "seeds"}``, plain data.

        Inside an epoch: that epoch and the batches the loop has taken so far (resuming
        yields the next one). Between epochs: the next epoch and 0. ``seeds`` are the
        seeds of the pipe's stages, checked by :meth:`load_state_dict`.
        """
        epoch, batches = self._live if self._live is not None else self._next
        return {"epoch": epoch, "batches_yielded": batches, "seeds": _seeds(self.pipe)}

    def load_state_dict(self, state: Dict) -> None:
        """Make the next ``iter()`` resume where ``state`` (from :meth:`state_dict`) was.

        Ends an unfinished epoch. The pipe must have been built with the same seeds
        (pass ``seed=`` to the ItemSampler and samplers, or ``torch.manual_seed`` before
        building them): a ValueError says which differ.
        """
        if not isinstance(state, dict) or not {"epoch", "batches_yielded"} <= set(state):
            raise ValueError(f"DataLoader.load_state_dict: expected a dict from state_dict(), got {state!r}")
        epoch = check_int(state["epoch"], "state['epoch']", "DataLoader.load_state_dict", minimum=0)
        batches = check_int(state["batches_yielded"], "state['batches_yielded']", "DataLoader.load_state_dict", minimum=0)
        saved, mine = state.get("seeds"), _seeds(self.pipe)
        if saved is not None and [tuple(s) for s in saved] != mine:
            raise ValueError(
                f"DataLoader.load_state_dict: the state was saved with stage seeds {saved}, this pipe has {mine}; "
                f"build the pipe with the same seeds (seed=... on the ItemSampler and the samplers)"
            )
        self._end_epoch()
        self._next = (epoch, batches)

    def close(self) -> None:
        """End the current epoch, if any, and stop every thread and worker process."""
        self._end_epoch()
        for workers in self._workers:
            workers.close()

    def __del__(self):
        self.close()

    def __len__(self) -> int:
        return len(self.pipe)

    def __repr__(self) -> str:
        """The chain as written, then as run (``explain()`` says more)."""
        return f"DataLoader({self.pipe!r}), as run:\n{describe(self.rewritten)}"

    def explain(self) -> str:
        """The pipe before and after rewriting, and where each stage runs."""
        names = ", ".join(_name(transform) for transform in self.transforms) or "none"
        return "\n".join(
            [
                "Pipe as written:",
                describe(self.pipe),
                f"Transforms: {names}",
                "Pipe as run:",
                describe(self.rewritten),
                f"  -> your training loop runs in: {MAIN}",
            ]
        )

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
        loader, ``wait_s`` the time spent waiting for batches.
        """
        where = placement(self.rewritten)
        timer_after = {id(stage.source): stage for stage in find(self.rewritten, Timed)}
        rows: Dict[str, Dict] = {}
        for stage in reversed(stages(self.rewritten)):
            timer = timer_after.get(id(stage))
            if timer is None:
                continue
            located, label = stage, stage.label()
            pulled = stage.source.source if stage.wraps_source else getattr(stage, "source", None)
            if isinstance(pulled, Pipe) and where[id(pulled)] != where[id(stage)]:
                # A boundary (a background thread, worker processes): its timer is the wait.
                work, wait = 0.0, timer.seconds
            else:
                # Timers are inclusive of same-thread upstream stages: subtract the upstream's.
                upstream_timer = _upstream_timer(stage)
                own = timer.seconds - (upstream_timer.seconds if upstream_timer is not None else 0.0)
                work, wait = own, 0.0
                if stage.wraps_source:
                    located, label = stage.source, f"{stage.source.label()} in {label}"
                    # A wrapper whose work runs in other threads (a pool) adds it up in
                    # work_seconds; its own timer is then the wait for results.
                    if getattr(stage, "work_seconds", None) is not None:
                        work, wait = stage.work_seconds, own
            key, n = label, 1
            while key in rows:
                n += 1
                key = f"{label}#{n}"
            rows[key] = {"where": where[id(located)], "batches": timer.batches, "work_s": work, "wait_s": wait}
        start, end = self._epoch_span
        waited = self.rewritten.seconds
        elapsed = (end if end is not None else time.perf_counter()) - start
        rows["consumer"] = {"where": MAIN, "batches": self.rewritten.batches, "work_s": elapsed - waited, "wait_s": waited}
        return rows


def _seeds(pipe: Pipe) -> List[tuple]:
    """``(stage type, seed)`` of every stage of ``pipe`` with a ``seed``, source first."""
    return [(type(stage).__name__, stage.seed) for stage in reversed(stages(pipe)) if isinstance(getattr(stage, "seed", None), int)]


def _name(transform) -> str:
    return getattr(transform, "__name__", repr(transform))


def _with_timers(pipe: Pipe) -> Pipe:
    """A copy of ``pipe`` with a :class:`Timed` after every stage (not between a stage
    that wraps its source and the stage it wraps, which it does not iterate).

    One rebuild down the ``.source`` links; the source stage (the ItemSampler) is shared.
    """
    source = getattr(pipe, "source", None)
    if pipe.wraps_source:
        inner = _with_timers(source.source) if isinstance(source.source, Pipe) else source.source
        rebuilt = with_source(pipe, with_source(source, inner))
    elif isinstance(source, Pipe):
        rebuilt = with_source(pipe, _with_timers(source))
    else:
        rebuilt = pipe
    return Timed(rebuilt)


def _upstream_timer(stage: Pipe) -> Optional[Timed]:
    return next((s for s in upstream(getattr(stage, "source", None)) if isinstance(s, Timed)), None)
