import gc
import threading
import time
import traceback
from concurrent.futures import Future

import numba
import pytest
import torch

from graphpipe import ItemSampler, ItemSet, MiniBatch
from graphpipe.pipes import Transform
from graphpipe.loading import Prefetcher, SideStream, ThreadPoolMap, Timed, Waiter
from graphpipe.pipes.base import Pipe


class Recorder(Pipe):
    """Yields 0..n-1, logging ('pull', i) into a shared list."""

    def __init__(self, n, log, fail_at=None):
        super().__init__()
        self.n, self.log, self.fail_at = n, log, fail_at

    def __iter__(self):
        for i in range(self.n):
            if i == self.fail_at:
                raise KeyError(f"toy failure at item {i}")
            self.log.append(("pull", i))
            yield i

    def __len__(self):
        return self.n


def _graphpipe_threads():
    """The stages' threads left alive (the process-wide kernel compile job, which an earlier
    test's loader may have started, is not a stage's: tests/loading leave it out too)."""
    return [t for t in threading.enumerate() if t.name.startswith("graphpipe") and t.name != "graphpipe-compile"]


def _double(x):
    return 2 * x


def test_prefetch_runs_upstream_in_a_thread_ahead_of_the_consumer():
    log = []
    pipe = Prefetcher(Recorder(20, log), buffer_size=3)
    iterator = iter(pipe)
    assert next(iterator) == 0
    deadline = time.monotonic() + 5
    while len(log) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    # item 0 was taken, 3 wait in the queue, one more is held by the blocked producer
    assert [i for _, i in log] == [0, 1, 2, 3, 4]
    assert list(iterator) == list(range(1, 20))
    assert len(pipe) == 20 and _graphpipe_threads() == []


def test_prefetch_reraises_the_original_exception_with_its_traceback():
    pipe = Prefetcher(Recorder(10, [], fail_at=4))
    seen = []
    with pytest.raises(KeyError, match="toy failure at item 4") as info:
        for item in pipe:
            seen.append(item)
    assert seen == [0, 1, 2, 3]
    frames = [frame.name for frame in traceback.extract_tb(info.value.__traceback__)]
    assert "__iter__" in frames and "_run" in frames  # the producer thread's frames are kept
    assert _graphpipe_threads() == []


def test_early_break_and_gc_stop_the_thread():
    pipe = Prefetcher(Prefetcher(Recorder(1000, [])), 2)
    for item in pipe:
        if item == 3:
            break
    gc.collect()
    assert _graphpipe_threads() == []
    iterator = iter(pipe)
    next(iterator)
    assert len(_graphpipe_threads()) == 2
    del iterator
    assert _graphpipe_threads() == []


def test_wait_resolves_futures_in_order():
    futures = []
    for value in range(4):
        future = Future()
        future.set_result(value * 10)
        futures.append(future)

    class Futures(Pipe):
        def __iter__(self):
            yield from futures

    assert list(Waiter(Futures())) == [0, 10, 20, 30]


def test_thread_pool_map_runs_the_stage_on_several_batches_in_order():
    active, peak, lock = [0], [0], threading.Lock()

    def slow_double(x):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1
        return 2 * x

    stage = Transform(Recorder(12, []), slow_double)
    pool = ThreadPoolMap(stage, num_threads=3)
    assert list(pool) == [2 * i for i in range(12)]
    assert peak[0] >= 2  # batches overlapped
    assert pool.work_seconds >= 12 * 0.02 * 0.9
    assert _graphpipe_threads() == []


def test_a_pool_over_two_stages_runs_both_in_one_pool_thread_per_batch():
    ran_in = []

    def first(x):
        ran_in.append(("first", x, threading.current_thread().name))
        return x + 1

    def second(x):
        ran_in.append(("second", x, threading.current_thread().name))
        return 10 * x

    pool = ThreadPoolMap(Transform(Transform(Recorder(6, []), first), second), 2, stages=2)
    assert list(pool) == [10 * (i + 1) for i in range(6)]
    assert all(name.startswith("graphpipe-pool") for _, _, name in ran_in)
    thread_of = {(step, x): name for step, x, name in ran_in}
    assert all(thread_of["first", i] == thread_of["second", i + 1] for i in range(6))  # one thread a batch
    assert [type(stage).__name__ for stage in pool.wrapped_stages()] == ["Transform", "Transform"]
    with pytest.raises(TypeError, match=r"ThreadPoolMap: Recorder has no per-batch function"):
        ThreadPoolMap(Transform(Transform(Recorder(6, []), first), second), 2, stages=3)
    with pytest.raises(ValueError, match=r"ThreadPoolMap: `stages` is 2, but only 1 stage\(s\) end at Transform"):
        ThreadPoolMap(Transform([1, 2], first), 2, stages=2)
    with pytest.raises(ValueError, match=r"ThreadPoolMap: `stages` must be an int >= 1, got 0"):
        ThreadPoolMap(Transform(Recorder(6, []), first), 2, stages=0)


def test_a_pool_thread_done_early_starts_a_later_batch_while_a_slow_one_runs():
    """With 2 threads, item 0 blocks until item 2 has started: the thread that finished
    item 1 must take item 2 while item 0 still runs (it waited for item 0 to be handed
    out before, so this ran into the 10 s timeout), and the order stays the same."""
    item_2_started = threading.Event()

    def work(x):
        if x == 0:
            assert item_2_started.wait(10), "item 2 did not start while item 0 was running"
        if x == 2:
            item_2_started.set()
        return 2 * x

    assert list(ThreadPoolMap(Transform(Recorder(6, []), work), 2)) == [2 * i for i in range(6)]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 numba threads")
def test_kernel_threads_set_numba_threads_of_the_background_threads():
    def numba_threads(_):
        return numba.get_num_threads()

    stage = Transform(Recorder(4, []), numba_threads)
    assert list(Prefetcher(stage)) == [numba.config.NUMBA_NUM_THREADS] * 4
    assert list(Prefetcher(stage, kernel_threads=1)) == [1] * 4
    assert list(ThreadPoolMap(stage, 2, kernel_threads=1)) == [1] * 4
    assert numba.get_num_threads() == numba.config.NUMBA_NUM_THREADS  # the consumer's is untouched
    with pytest.raises(ValueError, match=r"ThreadPoolMap: `kernel_threads` must be an int >= 1, got 0"):
        ThreadPoolMap(stage, 2, kernel_threads=0)


def test_thread_pool_map_reraises_and_validates():
    def fail_on_five(x):
        if x == 5:
            raise ArithmeticError("five")
        return x

    with pytest.raises(ArithmeticError, match="five"):
        list(ThreadPoolMap(Transform(Recorder(10, []), fail_on_five), 2))
    with pytest.raises(TypeError, match=r"ThreadPoolMap: Recorder has no per-batch function \(process\)"):
        ThreadPoolMap(Recorder(3, []), 2)
    with pytest.raises(ValueError, match=r"`num_threads` must be an int >= 1, got 0"):
        ThreadPoolMap(Transform(Recorder(3, []), _double), 0)
    with pytest.raises(ValueError, match=r"Prefetcher: `buffer_size` must be an int >= 1, got 0"):
        Prefetcher(Recorder(3, []), 0)


def test_timed_counts_batches_and_inclusive_seconds():
    def slow(x):
        time.sleep(0.01)
        return x

    timed = Timed(Transform(Recorder(5, []), slow))
    assert list(timed) == list(range(5))
    assert timed.batches == 5 and timed.seconds >= 0.04
    timed.reset_stats()
    assert timed.batches == 0 and timed.seconds == 0.0


def test_functional_names():
    pipe = ItemSampler(ItemSet(6), batch_size=2).prefetch(2).wait()
    assert isinstance(pipe, Waiter) and isinstance(pipe.source, Prefetcher)
    pipe = pipe.source
    assert [mb.batch_index for mb in pipe] == [0, 1, 2]


def test_side_stream_needs_a_cuda_device():
    copy = ItemSampler(ItemSet(4), batch_size=2).copy_to("cpu")
    with pytest.raises(ValueError, match=r"SideStream: `device` must be a CUDA device, got cpu"):
        SideStream(copy)


@pytest.mark.cuda
def test_side_stream_copies_on_its_own_stream_and_the_consumer_waits():
    streams = []

    def to_cuda(minibatch):
        streams.append(torch.cuda.current_stream())
        return minibatch.to("cuda", non_blocking=True)

    n = 1 << 22
    source = ItemSampler(ItemSet(torch.arange(n), names="seeds"), batch_size=n // 4).transform(MiniBatch.pin_memory)
    pending = list(SideStream(Transform(source, to_cuda), device="cuda"))
    assert len(pending) == 4 and len(set(streams)) == 1
    assert streams[0] != torch.cuda.current_stream() and streams[0].priority < 0
    batches = [p.result() for p in pending]
    total = torch.cat([mb.seeds for mb in batches]).sum()  # runs on the current stream after the events
    assert total.item() == n * (n - 1) // 2
    copy = ItemSampler(ItemSet(8), batch_size=4).copy_to("cuda")
    out = list(Waiter(Prefetcher(SideStream(copy))))
    assert [mb.seeds.tolist() for mb in out] == [[0, 1, 2, 3], [4, 5, 6, 7]] and out[0].seeds.is_cuda
