"""Compiling the numba kernels of a pipe in the background, from when its loader is built.

A kernel compiles on its first run unless numba's on-disk cache has it: a first run's
first batch waits 5-20 s for its sampler's. :func:`compile_kernels` starts compiling the
kernels a pipe's stages use in a daemon thread as soon as the pipe is known, and logs a
line when it takes long, so a first run does not look like a hang; a batch that needs a
kernel being compiled waits for numba's compiler lock, then uses it.

numba compiles one kernel at a time per process: when the job is still compiling after
its notice and there is a second core, the tasks after the current one go to a helper
process (``python -m graphpipe.loading.compile_helper``), last first, which writes them
to numba's cache while this process compiles the sampler.

At exit a job still running finishes its current task and starts no other: Python 3.11 ends
a daemon thread wanting the GIL during finalization with ``pthread_exit``, whose unwinding
through torch's C++ frames (a task runs its op on a tiny graph) aborted the process. The
helper process is left to finish writing the cache.
"""

from __future__ import annotations

import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from functools import partial
from typing import Callable, List, Optional, Sequence, Tuple

import numba
from numba.core import event

from graphpipe.ops.compile import cache_dir
from graphpipe.pipes.base import Pipe, upstream
from graphpipe.loading.stages import exit_wait_s, join_within
from graphpipe.loading.workers import ProcessWorkers

__all__ = ["CompileJob", "compile_kernels"]

logger = logging.getLogger("graphpipe")

NOTICE_AFTER_S = 1.0  # no notice for tasks that end within this long (or that compile nothing)
# A first run's compilation on 2 cores, for the notice: 5.4-6.5 s from DataLoader() to the first
# NS or LABOR batch on the 200k-node synthetic graph (README.md), 9.2-9.8 s to the job's end.
LOADER_FIRST_RUN = "5-10 s"

Task = Tuple[str, Callable[[], None]]

# One notice at a time: loaders built back to back start jobs that wait on the same compilations.
_notice_lock = threading.Lock()
_notice_shown = False
# Jobs whose thread runs: at exit they finish their current task (_stop_at_exit).
_running: "set[CompileJob]" = set()
_POLL_S = 0.05


class CompileJob:
    """``tasks`` (``(name, function)`` pairs) run in order by a daemon thread, or here
    when ``background`` is false; ``wait()`` blocks until they are done and re-raises a
    task's exception.

    When they take longer than ``notice_after`` seconds and numba compiles for them (a
    load from its cache, slow on a loaded machine, is not reported), one line goes to the
    ``graphpipe`` logger saying that a first run takes ``first_run`` and where numba
    caches ``kernel`` (graphpipe's ops by default), and one more when they end. With
    ``helper_process``, the tasks after the current one then run in a helper process
    (if their functions pickle); :attr:`handed_off` is the index of the first of them.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        background: bool = True,
        notice_after: float = NOTICE_AFTER_S,
        helper_process: bool = False,
        first_run: str = LOADER_FIRST_RUN,
        kernel=None,
    ):
        self.tasks: List[Task] = list(tasks)
        self.first_run = first_run
        self._cache_dir = partial(cache_dir, kernel) if kernel is not None else cache_dir
        self.seconds: Optional[float] = None  # how long the tasks took, once done
        self.handed_off: Optional[int] = None  # the tasks from here on ran in a helper process
        self._helper_process = helper_process
        self._helper: Optional[subprocess.Popen] = None
        self._error: Optional[BaseException] = None
        self._current = 0
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._stop = threading.Event()
        self._noticed = False
        self._late = False  # notice_after has passed
        self._compiling = False  # numba compiled something for a task (not a load from its cache)
        _watch_process()
        self._timer = threading.Timer(notice_after, self._on_time)
        self._timer.daemon = True
        self._timer.start()
        if background:
            with _notice_lock:
                _running.add(self)
            self._thread = threading.Thread(target=self._run, name="graphpipe-compile", daemon=True)
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        global _notice_shown
        start = time.perf_counter()
        _in_job.job = self  # its compilations have this job's notice
        try:
            for index, (_, task) in enumerate(self.tasks):
                with self._lock:
                    if self._stop.is_set() or (self.handed_off is not None and index >= self.handed_off):
                        break
                    self._current = index
                task()
            # The helper's exit status is not checked: a batch reports a failing kernel.
            while self._helper is not None and self._helper.poll() is None and not self._stop.is_set():
                self._stop.wait(_POLL_S)
        except BaseException as error:  # kept for wait(); a batch that runs the task raises it too
            self._error = error
        finally:
            _in_job.job = None
            self.seconds = time.perf_counter() - start
            self._timer.cancel()
            # The notices are written under the lock, and "ready" before wait() returns.
            with self._lock:
                if self._noticed:
                    logger.warning("graphpipe: kernels ready after %.1f s", self.seconds)
                    with _notice_lock:
                        _notice_shown = False
                self._done.set()
            with _notice_lock:
                _running.discard(self)

    def _on_time(self) -> None:
        with self._lock:
            self._late = True
            if self._compiling:
                self._notice()

    def _compiles(self) -> None:
        """numba starts compiling in a task: a slow job that only loads kernels from the cache
        (a loaded machine) says nothing."""
        with self._lock:
            if not self._compiling:
                self._compiling = True
                if self._late:
                    self._notice()

    def _notice(self) -> None:
        """Called with ``_lock`` held."""
        global _notice_shown
        with _notice_lock:
            if self._done.is_set() or self._stop.is_set() or _notice_shown:
                return
            self._noticed = _notice_shown = True
            names = ", ".join(dict.fromkeys(name for name, _ in self.tasks[self._current :]))
            logger.warning(
                "graphpipe: compiling numba kernels for %s (a first run takes %s on 2 cores; later runs load them "
                "from the cache in %s)",
                names,
                self.first_run,
                self._cache_dir(),
            )
            if self._helper_process:
                self._hand_off(self._current + 1)

    def _hand_off(self, first: int) -> None:
        """Start a helper process on ``tasks[first:]``, last first (called with the lock held)."""
        if first >= len(self.tasks):
            return
        try:
            payload = pickle.dumps([task for _, task in reversed(self.tasks[first:])])
        except Exception:  # a task that does not pickle (a user's sampler) stays here
            return
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        path = os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))  # graphpipe, however imported
        self._helper = subprocess.Popen(
            [sys.executable, "-m", "graphpipe.loading.compile_helper"], env=dict(os.environ, PYTHONPATH=path),
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._helper.stdin.write(payload)
        self._helper.stdin.close()
        self.handed_off = first

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Wait for the tasks (at most ``timeout`` seconds) and re-raise a task's
        exception. Returns whether they are done."""
        finished = self._done.wait(timeout)
        if finished and self._error is not None:
            raise self._error
        return finished


class _InJob(threading.local):
    job: Optional[CompileJob] = None  # the CompileJob whose tasks this thread runs


_in_job = _InJob()


class _OnDemandNotice(event.Listener):
    """Says why a batch waits for a graphpipe kernel that no job compiled yet (numba
    compiles it on demand): a line on the ``graphpipe`` logger when the compilation takes
    longer than ``NOTICE_AFTER_S``, one when it ends. E.g. a cold epoch's last, partial
    batch needs ``unique_and_compact``'s sparse-id kernel, which the job's helper process
    may not have cached yet (it waited 9-19 s silently). Compilations in a CompileJob
    (its own notice) and outside graphpipe are not reported; numba compiles one function
    at a time, so one counter of nested compilations is enough."""

    def __init__(self):
        self._lock = threading.Lock()
        self._depth = 0
        self._running: Optional[Tuple[threading.Timer, float]] = None  # the reported compilation's timer and start
        self._noticed = False

    def on_start(self, ev) -> None:
        self._depth += 1
        if _in_job.job is not None:
            _in_job.job._compiles()
            return
        function = ev.data["dispatcher"].py_func
        module = getattr(function, "__module__", None) or ""
        if self._depth > 1 or not module.startswith("graphpipe."):
            return
        with self._lock:
            timer = threading.Timer(NOTICE_AFTER_S, self._notice, (f"{module}.{function.__qualname__}",))
            timer.daemon = True
            self._running = (timer, time.perf_counter())
            timer.start()

    def on_end(self, ev) -> None:
        self._depth -= 1
        if self._depth:
            return
        with self._lock:
            running, self._running = self._running, None
            if running is not None:
                running[0].cancel()
                if self._noticed:
                    self._noticed = False
                    logger.warning("graphpipe: kernel ready after %.1f s", time.perf_counter() - running[1])

    def _notice(self, name: str) -> None:
        """Runs in the compilation's timer thread."""
        with self._lock:
            if self._running is None or self._running[0] is not threading.current_thread():
                return  # ended meanwhile
            self._noticed = True
            logger.warning(
                "graphpipe: a batch waits for numba to compile %s (its first use in this install, e.g. by a "
                "smaller last batch; later runs load it from the cache in %s)",
                name,
                cache_dir(),
            )


_on_demand_notice: List[_OnDemandNotice] = []


def _watch_process() -> None:
    """When the first job starts (not at import): register the :class:`_OnDemandNotice`
    with numba, and :func:`_stop_at_exit` to run at exit."""
    with _notice_lock:
        if not _on_demand_notice:
            _on_demand_notice.append(_OnDemandNotice())
            event.register("numba:compile", _on_demand_notice[0])
            # Before the atexit hooks (the loader's stages wait there for their batches, which may
            # wait for numba's compiler lock that a job holds): threading's own exit hooks.
            threading._register_atexit(_stop_at_exit)


def _stop_at_exit() -> None:
    """Let the running jobs finish their current task, start no other, and stop waiting
    for their helper process; wait as long as for the loader's stages (``exit_wait_s``)."""
    with _notice_lock:
        running = list(_running)
    for job in running:
        job._stop.set()
    join_within([job._thread for job in running], exit_wait_s())


def compile_kernels(pipe: Pipe, background: bool = True) -> CompileJob:
    """Start compiling (or loading from numba's cache) each stage's ``compile_tasks()``,
    upstream first (the order a batch needs them), for the stages of ``pipe`` that run in
    this process (not those upstream of ``ProcessWorkers``). ``background`` false runs
    them here (for numba's ``workqueue`` layer, which aborts when parallel kernels start
    from two threads at once).
    """
    chain = upstream(pipe)  # sink first
    here = chain[: next((i for i, stage in enumerate(chain) if isinstance(stage, ProcessWorkers)), len(chain))]
    tasks = [(type(stage).__name__, task) for stage in reversed(here) for task in stage.compile_tasks()]
    return CompileJob(tasks, background=background, helper_process=numba.config.NUMBA_NUM_THREADS > 1)
