"""Worker processes for the part of a chain before feature fetching (``num_workers``), for
samplers with Python-heavy per-batch work, which threads cannot overlap.

A ``"workers"`` place builds ``ProcessWorkers(chain with a Shard)``: worker ``w`` of ``W``
iterates its own copy of the chain keeping batches ``i = w (mod W)``, and the consumer
takes batch ``i`` from worker ``i mod W``, so batches keep their order and content
(samplers key their randomness by ``batch_index``).

Start method ``forkserver``, graphpipe preloaded: ``fork`` is unsafe once a parallel
kernel ran in the parent (numba's GNU OpenMP layer), and ``spawn`` would import torch and
numba in every worker. The fork server starts once per program (1-2 s); workers fork from
it in ~10 ms, get the chain pickled with torch's reductions (tensors in shared memory),
load numba's cached kernels on their first batch (0.3-1 s) and persist across epochs. A
batch travels as one message: its pickle and one shared-memory buffer holding its tensors'
storages up to 1 MiB (:class:`_Packed`); larger ones travel as torch sends them.
Each worker first runs the main script again (as ``__mp_main__``), which is why scripts
start workers under ``if __name__ == "__main__":``; a script without the guard (as PyG's
examples) gets workers that skip the script, where the stages they run need nothing it
defines (:func:`workers_rerun_main`).
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import functools
import io
import itertools
import linecache
import os
import pickle
import queue
import signal
import sys
import threading
import weakref
from multiprocessing import forkserver, resource_tracker
from multiprocessing.reduction import ForkingPickler
from typing import List, Optional, Tuple

import numba
import numpy as np
import torch
import torch.multiprocessing as mp
from torch._utils import ExceptionWrapper

from graphpipe._internal.safe_files import process_exists
from graphpipe.pipes.base import Pipe, source_stream, upstream
from graphpipe._internal.checks import check_int
from graphpipe.loading.stages import (
    OnSource,
    Timed,
    close_iterator,
    exit_wait_s,
    in_collector,
    join_within,
    put_while,
    watch_process,
)

__all__ = ["ProcessWorkers", "Shard", "workers_rerun_main"]

_POLL_S = 0.05
# The fork server and so the workers start with the README's OpenMP settings for few cores, unless
# the environment sets either: several workers a core spinning idle starved each other.
_WORKER_OPENMP = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}
_JOIN_TIMEOUT_S = 2.0  # how long a terminated worker may take to exit before it is killed
_DEATH_WAIT_S = 2.0  # how long a worker whose batch could not be received may take to exit
# Workers told to stop: at exit each finishes its batch and exits on its own (_join_at_exit).
_stopped: "weakref.WeakSet" = weakref.WeakSet()


class Shard(OnSource):
    """Keep the items ``i`` of ``source`` with ``i % count == index`` (``i`` from 0); each
    worker process sets ``index`` to its rank (:func:`~graphpipe.loading.policy.place`
    puts it right after the source)."""

    def __init__(self, source: Pipe, index: int = 0, count: int = 1):
        if not 0 <= index < count:
            raise ValueError(f"Shard: need 0 <= index < count, got index={index}, count={count}")
        super().__init__(source)
        self.index = index
        self.count = count

    def stream(self, epoch: int, start: int = 0):
        for i, item in enumerate(source_stream(self.source, epoch, start), start):
            if i % self.count == self.index:
                yield item

    def __len__(self) -> int:
        return len(range(self.index, len(self.source), self.count))


class _WorkerDone:
    """End of a worker's epoch."""


# Storages up to this size travel in a batch's one shared buffer, larger ones as torch sends
# them (a shared-memory file each, no copy in the consumer): with 2 workers on 2 cores, a PyG
# heterogeneous batch took 24 ms at 1 MiB against 36 at 64 KiB and 26 at 16 MiB
# (benchmarks/RESULTS.md, "Worker batches in one buffer").
_PACKED_MAX_BYTES = 1 << 20


class _Packer(ForkingPickler):
    """Pickles a batch, leaving out the storages of its private (not shared) CPU tensors up
    to ``_PACKED_MAX_BYTES``: ``storages`` holds each once, and the pickle names it by index."""

    def __init__(self, file):
        super().__init__(file, pickle.HIGHEST_PROTOCOL)
        self.storages = {}  # (data pointer, bytes) -> (index, storage)

    def persistent_id(self, obj):
        if type(obj) is not torch.Tensor or obj.device.type != "cpu" or obj.layout != torch.strided or obj.is_nested:
            return None
        if obj.requires_grad or obj.is_quantized or obj.is_conj() or obj.is_neg() or obj.is_shared():
            return None
        storage = obj.untyped_storage()
        if storage.nbytes() > _PACKED_MAX_BYTES:
            return None
        index = self.storages.setdefault((storage.data_ptr(), storage.nbytes()), (len(self.storages), storage))[0]
        return index, obj.dtype, obj.storage_offset(), tuple(obj.shape), obj.stride()


class _Packed:
    """A batch as a worker sends it: its pickle and one shared-memory buffer holding the small
    storages of its tensors end to end. torch sends each storage as a shared-memory file whose
    descriptor the consumer fetches over a socket, about 0.5 ms each, and a PyG heterogeneous
    batch has dozens."""

    def __init__(self, item):
        file = io.BytesIO()
        packer = _Packer(file)
        packer.dump(item)
        self.data = file.getvalue()
        storages = [storage for _, storage in packer.storages.values()]
        self.sizes = [storage.nbytes() for storage in storages]
        self.buffer = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(sum(self.sizes)))
        for storage, part in zip(storages, self.buffer.split(self.sizes)):
            part.copy_(torch.empty(0, dtype=torch.uint8).set_(storage))

    def unpack(self):
        """The batch. Each storage is copied out of the buffer on its own, so that a tensor
        kept keeps only its storage alive, and tensors that shared one share its copy."""
        storages = [part.clone().untyped_storage() for part in self.buffer.split(self.sizes)]

        def tensor(pid):
            index, dtype, offset, shape, stride = pid
            return torch.empty(0, dtype=dtype).set_(storages[index], offset, shape, stride)

        unpickler = pickle.Unpickler(io.BytesIO(self.data))
        unpickler.persistent_load = tensor
        return unpickler.load()


class _StageClock:
    """A worker's :class:`Timed` stages' seconds and batches since the last reading, sent
    with each batch so that ``DataLoader.stats()`` is current inside an epoch. Every worker
    runs the stages before the Shard over all batches and keeps its share: they count the
    batches the Shard kept, so the workers' counts add up to the epoch's."""

    def __init__(self, pipe: Pipe, shard: Shard):
        self.timed = [stage for stage in upstream(pipe) if isinstance(stage, Timed)]
        before_shard = {id(stage) for stage in upstream(shard.source)}
        kept = next((stage for stage in self.timed if stage.source is shard), None)  # None: not under a DataLoader
        self.counters = [kept if kept is not None and id(stage) in before_shard else stage for stage in self.timed]
        self.reset()

    def reset(self) -> None:
        for stage in self.timed:
            stage.reset_stats()
        self.last = [(0.0, 0)] * len(self.timed)

    def read(self) -> List[Tuple[float, int]]:
        now = [(stage.seconds, counter.batches) for stage, counter in zip(self.timed, self.counters)]
        since = [(seconds - s, batches - b) for (seconds, batches), (s, b) in zip(now, self.last)]
        self.last = now
        return since


def _the_shard(pipe: Pipe) -> Shard:
    shards = [stage for stage in upstream(pipe) if isinstance(stage, Shard)]
    if len(shards) != 1:
        raise ValueError(f"ProcessWorkers: the chain must contain exactly one Shard stage, found {len(shards)}")
    return shards[0]


def _serve(pipe: Pipe, rank: int, num_workers: int, commands, out, current, stop, consumer_pid: int) -> None:
    """Body of worker process ``rank``: serve epochs of its shard of ``pipe`` until told to stop
    (``stop.value`` set, a ``None`` command, or the consumer gone).

    A command ``(run, epoch, start)`` starts an epoch at batch ``start``; every message is
    tagged with ``run`` (the consumer drops what an aborted run left), and the run ends
    early when ``current.value`` (the run the consumer wants) changes.
    """
    # The consumer handles Ctrl-C and stops the workers; at shutdown nothing left in the
    # queue matters, so the process exits without flushing it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out.cancel_join_thread()
    torch.set_num_threads(1)
    numba.set_num_threads(max(1, numba.config.NUMBA_NUM_THREADS // num_workers))
    shard = _the_shard(pipe)
    shard.index, shard.count = rank, num_workers
    clock = _StageClock(pipe, shard)
    while not stop.value:
        try:
            command = commands.get(timeout=_POLL_S)
        except queue.Empty:
            if not process_exists(consumer_pid):
                return  # the consumer was killed (SIGKILL, OOM) without stopping us
            continue
        if command is None:
            return
        run, epoch, start = command

        def serving():
            return current.value == run and not stop.value and process_exists(consumer_pid)

        clock.reset()
        iterator = None
        try:
            iterator = pipe.stream(epoch, start)
            for item in iterator:
                if not put_while(out, (run, _Packed(item), clock.read()), serving):
                    break
            else:
                put_while(out, (run, _WorkerDone(), clock.read()), serving)
        except Exception:
            where = f"in graphpipe worker process {rank} (pid {os.getpid()})"
            put_while(out, (run, ExceptionWrapper(where=where), []), serving)
        finally:
            close_iterator(iterator)


def _is_main_guard(test: ast.expr) -> bool:
    """Whether an ``if`` test is ``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and any(
        isinstance(x, ast.Constant) and x.value == "__main__" for x in sides
    )


def _parsed(path: str) -> Optional[ast.Module]:
    """The syntax tree of the script ``path``; None when it cannot be read or parsed."""
    try:
        with open(path, "rb") as file:
            return ast.parse(file.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None


def _guarded_lines(tree: ast.Module) -> List[range]:
    """The line ranges of the bodies of ``if __name__ == "__main__":`` blocks in ``tree``."""
    return [
        range(node.body[0].lineno, node.body[-1].end_lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_main_guard(node.test)
    ]


def _unguarded_main_line() -> Optional[Tuple[str, int]]:
    """``(file, line)`` of the main script's module-level code that is starting worker
    processes outside an ``if __name__ == "__main__":`` block, else None: a module-level
    frame of ``__main__`` on a line in no guard, or any of ``__mp_main__`` (a worker
    re-running the script).

    Only the main thread's own frames are walked (elsewhere: None): walking other threads'
    (``sys._current_frames()``) holds CPython's thread-list lock, and a garbage collection
    there that finalized a loader deadlocked every thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    frame = sys._getframe(1)
    while frame is not None:
        code, name = frame.f_code, frame.f_globals.get("__name__")
        if code.co_name == "<module>" and name in ("__main__", "__mp_main__"):
            if name == "__mp_main__":
                return code.co_filename, frame.f_lineno
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            if not (main_file and os.path.isfile(code.co_filename) and os.path.samefile(code.co_filename, main_file)):
                return None  # python -c, a REPL, a notebook cell: the workers do not re-run it
            tree = _parsed(code.co_filename)
            if tree is None or any(frame.f_lineno in lines for lines in _guarded_lines(tree)):
                return None
            return code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None


def workers_rerun_main(num_workers: int, pipe: Pipe) -> bool:
    """Whether worker processes may run the main script again (forkserver's and spawn's
    way): True, unless the script starts them from unguarded module-level code
    (:func:`_unguarded_main_line`), which would then run in every worker. Such a script
    works as with PyG's loader: its workers start without the main script, provided the
    part of ``pipe`` they run needs nothing the script defines; else this raises, saying so.

    Forking, PyG's and torch's way on Linux, is not safe once torch or numba ran parallel
    code in this process, as any training script has: a forked child inherits GNU
    OpenMP's thread pool without its threads and waits for them forever in its first
    parallel torch op (``gomp_team_end``), and numba terminates it in its first parallel
    kernel."""
    unguarded, defined = _unguarded_main_line(), _defined_in_main(pipe)
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file is not None and not os.path.isfile(main_file):
        raise RuntimeError(
            f"DataLoader(num_workers={num_workers}): the main script ({main_file!r}) is not a file worker processes "
            f"can run again, which they do when they start; save it as a .py file and run that, or use num_workers=0"
        )
    if main_file is None and defined:  # a notebook, python -c, a REPL
        raise RuntimeError(
            f"DataLoader(num_workers={num_workers}): the stages the workers run use {', '.join(defined)}, defined "
            f"in this notebook or interactive session, which worker processes cannot import; define them in a .py "
            f"module you import, or use num_workers=0"
        )
    if unguarded is None:
        hidden = _defined_only_under_main_guard(defined)
        if hidden:
            raise RuntimeError(
                f"DataLoader(num_workers={num_workers}): the stages the workers run use {', '.join(hidden)}, which "
                f"the script defines inside `if __name__ == \"__main__\":`; worker processes run the script without "
                "that block, so they could not find them. Define them at the top level of the script (outside the "
                "block), or in a module the script imports."
            )
        return True
    if not defined:
        return False
    path, line = unguarded
    source = linecache.getline(path, line).strip()
    raise RuntimeError(
        f"DataLoader(num_workers={num_workers}): the script starts worker processes from module-level code "
        f"outside `if __name__ == \"__main__\":` ({os.path.basename(path)}, line {line}: `{source}`), and the "
        f"stages the workers run use {', '.join(defined)}, defined in the script, so every worker would first run "
        "the script again, and this line in it. Put the training code under `if __name__ == \"__main__\":` (e.g. in "
        "a main() function called from there), or define those in a module the script imports."
    )


def _defined_only_under_main_guard(names: List[str]) -> List[str]:
    """Those of ``names`` (qualified names of the main script's classes and functions) that
    the script defines only inside ``if __name__ == "__main__":`` blocks."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    tree = _parsed(path) if names and path else None
    if tree is None:
        return []
    guards = _guarded_lines(tree)
    guarded, elsewhere = set(), set()

    def visit(nodes) -> None:
        """The definitions at module level, also inside ``if``, ``try`` and ``with`` blocks."""
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                (guarded if any(node.lineno in lines for lines in guards) else elsewhere).add(node.name)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ExceptHandler)):
                visit(ast.iter_child_nodes(node))

    visit(tree.body)
    return [name for name in names if name.split(".")[0] in guarded - elsewhere]


def _defined_in_main(pipe: Pipe) -> List[str]:
    """The names of what the stages up to ``pipe`` use (their classes, callables they
    hold, at any depth: partials, closures' globals aside) that the main script defines:
    a worker unpickles them from ``__main__``. Found by pickling the chain to nowhere,
    tensors and arrays left out."""
    with open(os.devnull, "wb") as nowhere:
        finder = _MainFinder(nowhere)
        with contextlib.suppress(Exception):  # unpicklable: starting the workers says so
            finder.dump(pipe)
    return sorted(finder.found)


class _MainFinder(pickle.Pickler):
    """A pickler that records the classes and functions of ``__main__`` it meets."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.found = set()

    def reducer_override(self, obj):
        if isinstance(obj, (torch.Tensor, np.ndarray)):
            return tuple, ()
        named = obj if isinstance(obj, type) or callable(obj) and hasattr(obj, "__qualname__") else type(obj)
        if getattr(named, "__module__", None) == "__main__":
            self.found.add(named.__qualname__)
            if named is obj:
                return tuple, ()
        return NotImplemented


_hiding_lock = threading.Lock()  # loaders may (re)start worker pools from several threads


@contextlib.contextmanager
def _main_script_hidden():
    """While processes start, hide the main script from multiprocessing, so that its
    spawn/forkserver children do not run it again (they do when ``__main__`` names a
    file, ``__file__``, or a module, ``__spec__``). One pool at a time, so each restores
    what it hid."""
    with _hiding_lock:
        main = sys.modules["__main__"]
        saved = {name: main.__dict__[name] for name in ("__file__", "__spec__") if name in main.__dict__}
        main.__dict__.pop("__file__", None)
        main.__spec__ = None
        try:
            yield
        finally:
            main.__dict__.update(saved)


def _start_forkserver():
    """The ``forkserver`` multiprocessing context, its server started if not running, with
    graphpipe preloaded and SIGINT blocked in this thread: it keeps that mask, and so do the
    workers it forks. CPython's fork server ignores SIGINT only after preloading graphpipe
    (1-2 s), and a worker only once it serves: a Ctrl-C then printed their KeyboardInterrupt
    tracebacks after the program's. The resource tracker is started first: starting it
    unblocks SIGINT. The server's environment adds ``_WORKER_OPENMP`` (read when it imports
    torch); this process's stays as it was."""
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["graphpipe"])
    resource_tracker.ensure_running()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    unset = [] if any(name in os.environ for name in _WORKER_OPENMP) else list(_WORKER_OPENMP)
    os.environ.update({name: _WORKER_OPENMP[name] for name in unset})
    try:
        forkserver.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for name in unset:
            del os.environ[name]
    return context


class _WorkerPool:
    """``num_workers`` processes serving epochs of one chain; see :class:`ProcessWorkers`."""

    def __init__(self, pipe: Pipe, num_workers: int, buffer_size: int, rerun_main: Optional[bool] = None):
        if rerun_main is None:
            rerun_main = workers_rerun_main(num_workers, pipe)
        watch_process()  # a finalizer in the garbage collector then only signals the workers
        context = _start_forkserver()
        # Shared memory without locks: stopping (from a finalizer too) only writes them.
        self.current = context.RawValue("q", 0)  # the run the consumer wants, 0: none
        self.stop = context.RawValue("b", 0)  # 1: every worker exits
        self.commands = [context.Queue() for _ in range(num_workers)]
        self.results = [context.Queue(buffer_size) for _ in range(num_workers)]
        self.processes = []
        self.last_run = 0
        # Held while the workers start (the first waits 1-2 s for a new fork server): stopping
        # waits for it, so no worker starts after its queues' semaphores are gone.
        starting = threading.RLock()
        self._finalizer = weakref.finalize(
            self, _stop_pool, self.processes, self.commands, self.results, self.stop, starting
        )
        # Registered after multiprocessing's exit hook (the queues above import it), so it runs
        # first, and before _join_at_exit: the workers stop and exit on their own; terminated by
        # that hook, they would leave numba's semaphore registered ("leaked semaphore objects").
        _register_join_at_exit()
        atexit.register(self._finalizer)
        with starting, contextlib.nullcontext() if rerun_main else _main_script_hidden():
            for rank in range(num_workers):
                shared = (self.commands[rank], self.results[rank], self.current, self.stop, os.getpid())  # see _serve
                process = context.Process(
                    target=_serve, args=(pipe, rank, num_workers, *shared), name=f"graphpipe-worker-{rank}", daemon=True
                )
                try:
                    process.start()
                except Exception as error:
                    self.close()
                    hint = ""
                    if isinstance(error, (pickle.PicklingError, TypeError, AttributeError)):
                        hint = (
                            "; the part of the pipe that runs in workers (before fetch_feature) must be picklable "
                            "(no lambdas or local functions)"
                        )
                    raise RuntimeError(
                        f"ProcessWorkers: could not start a worker process ({type(error).__name__}: {error}){hint}"
                    ) from error
                self.processes.append(process)

    def close(self) -> None:
        self._finalizer()
        atexit.unregister(self._finalizer)


def _stop_pool(processes, commands, results, stop, starting) -> None:
    """Tell the workers to stop and wait ``join_within``'s timeout for them, so that
    close() and Ctrl-C return promptly; a worker still in a batch then (a long kernel)
    exits on its own after it, and exit waits for it (:func:`_join_at_exit`). Inside the garbage
    collector only ``stop`` is set (the workers see it within ``_POLL_S``). Else the
    workers being started (``starting`` held) are waited for: a worker started after
    exit unlinked its queues' semaphores failed with a traceback."""
    stop.value = 1
    if in_collector():
        _stopped.update(processes)
        return
    with starting:  # then the workers being started are in processes
        _stopped.update(processes)
    for command in commands:
        command.put(None)
    join_within(processes)
    for q in commands + results:
        q.cancel_join_thread()
        q.close()


@functools.lru_cache(maxsize=None)
def _register_join_at_exit() -> None:
    """With the first pool (nothing at import): :func:`_join_at_exit` at exit, after the pools'
    own hooks (registered later, run first) and before multiprocessing's (registered when its
    queues were imported), which terminates the workers still running."""
    atexit.register(_join_at_exit)


def _join_at_exit() -> None:
    """At exit, after the pools' own hooks told their workers to stop: wait for every
    worker told to stop (:func:`~graphpipe.loading.stages.exit_wait_s` at most), then
    terminate, and kill, those still running. Terminating is the last resort: numba's
    lock in a worker is a named semaphore (the worker's start method is forkserver) that
    only its own exit unregisters; a terminated worker leaves it to the
    resource tracker, which warns ("leaked semaphore objects")."""
    processes = list(_stopped)
    join_within(processes, exit_wait_s())
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(_JOIN_TIMEOUT_S)
        if process.is_alive():
            process.kill()
            process.join()


def _death_message(process, rank: int) -> str:
    """Which worker died and how, from its exit code (``-N``: killed by signal ``N``)."""
    code = process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how = f"killed by signal {name}"
        if -code == signal.SIGKILL:
            how += " (out of memory? the kernel's OOM killer sends SIGKILL)"
    else:
        how = f"exited with code {code} (its traceback, if any, is on stderr)"
    return f"DataLoader worker {rank} (pid {process.pid}) died: {how}"


class ProcessWorkers(OnSource):
    """Run the upstream chain in ``num_workers`` processes and yield its batches in order.

    ``source`` must contain one :class:`Shard` stage (after the ItemSampler). The first
    epoch starts the processes; they serve later epochs (each its shard, up to
    ``buffer_size`` batches queued) until :meth:`close` or garbage collection. A worker's
    exception is re-raised in the consumer with its traceback; a worker that dies is
    reported and the next epoch starts fresh ones; leaving an epoch early ends theirs.
    """

    def __init__(self, source: Pipe, num_workers: int, buffer_size: int = 2):
        _the_shard(source)
        super().__init__(source)
        self.num_workers = check_int(num_workers, "num_workers", "ProcessWorkers", minimum=1)
        self.buffer_size = check_int(buffer_size, "buffer_size", "ProcessWorkers", minimum=1)
        self._pool: Optional[_WorkerPool] = None
        # Set by the DataLoader, which decides in the main thread (workers_rerun_main).
        self.rerun_main: Optional[bool] = None

    def upstream_location(self, here: str, new_thread) -> str:
        return f"{self.num_workers} worker processes"

    def label(self) -> str:
        return f"ProcessWorkers({self.num_workers})"

    def running(self) -> bool:
        """Whether the worker processes are up (the next epoch starts none)."""
        return self._pool is not None and all(process.is_alive() for process in self._pool.processes)

    def start(self, rerun_main: Optional[bool]) -> None:
        """Start the worker processes now, not at the first epoch (``rerun_main`` None: decide
        here, :func:`workers_rerun_main`)."""
        self.rerun_main = rerun_main
        if not self.running():
            self.close()
            self._pool = _WorkerPool(self.source, self.num_workers, self.buffer_size, rerun_main)

    def close(self) -> None:
        """Stop the worker processes (the next epoch starts new ones)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def stream(self, epoch: int, start: int = 0):
        self.start(self.rerun_main)
        pool = self._pool
        pool.last_run += 1
        run = pool.current.value = pool.last_run
        for command in pool.commands:
            command.put((run, epoch, start))
        finished = False
        timed = [stage for stage in upstream(self.source) if isinstance(stage, Timed)]  # the loader's copies
        try:
            done = 0
            for i in itertools.count():
                rank = (start + i) % self.num_workers  # worker w has the batches j = w (mod W)
                item, timings = self._get(pool, rank, run)
                for stage, (seconds, batches) in zip(timed, timings):  # the worker's _StageClock.read()
                    stage.seconds += seconds
                    stage.batches += batches
                if isinstance(item, _WorkerDone):
                    done += 1
                    if done == self.num_workers:
                        finished = True
                        return
                    continue
                if done:
                    raise RuntimeError(f"ProcessWorkers: worker {rank} produced a batch after another worker ended")
                yield item
        finally:
            if not finished:
                pool.current.value = 0  # the workers abandon this run

    def _get(self, pool: _WorkerPool, rank: int, run: int):
        """``(item, its stage timings)``: worker ``rank``'s next message of ``run``."""
        process = pool.processes[rank]
        while True:
            try:
                message_run, item, timings = pool.results[rank].get(timeout=_POLL_S)
            except queue.Empty:
                if not process.is_alive():
                    raise RuntimeError(_death_message(process, rank)) from None
                continue
            except (OSError, EOFError) as error:
                # A batch's tensors travel as file descriptors that the consumer fetches
                # from the worker when it unpickles the batch: a worker killed after
                # queueing a batch shows up here as ConnectionResetError or similar.
                process.join(_DEATH_WAIT_S)
                if not process.is_alive():
                    raise RuntimeError(_death_message(process, rank)) from None
                raise RuntimeError(
                    f"DataLoader worker {rank} (pid {process.pid}) is alive but its batch could not be "
                    f"received: {type(error).__name__}: {error}"
                ) from error
            if message_run != run:
                continue  # left over from an epoch that ended early
            if isinstance(item, ExceptionWrapper):
                item.reraise()
            return (item.unpack() if isinstance(item, _Packed) else item), timings
