"""The execution planner behind ``DataLoader(pipe, plan="auto")``: measured costs in, a plan out.

After DAHA (Wang et al., PVLDB 2024): per-stage costs are measured on the first batches,
a cost model predicts the throughput of each candidate plan, and measurement confirms.

1. **Calibration** (:func:`calibrate`): the chain runs inline for a few batches (after
   two unmeasured ones, which compile the kernels), alternately with numba kernels on
   all ``C`` cores and on one thread. Each stage's wall and core-seconds (the process's
   CPU time) per batch at both thread counts are ratio estimates on the batches' sampled
   edges, so the two interleaved halves compare batches of the same size; the training
   loop's time between batches is measured too.
2. **Prediction** (:func:`predict`): a stage's wall on ``k`` kernel threads follows
   Amdahl's law through its two measurements, ``W(k) = s + p / k``. A chain in one thread
   runs at the sum of its stages' walls; stages in their own threads run at the slowest
   of them (a pool of ``P`` sampler threads samples ``P`` batches at once with kernels on
   ``C // P`` threads each, the fetcher's thread gathers on ``fetch_kernel_threads``,
   kernels run elsewhere on all ``C``; a whole-batch pool also fetches in the sampler's
   threads, ``(W_s + W_f) / P``; the thread feeding a pool runs the stages before it
   meanwhile). Everything is capped by the cores, ``C`` over the
   core-seconds a batch holds: a kernel on ``k`` threads has a static schedule, so beside
   other busy threads it runs at the pace of its slowest thread and holds ``k`` cores for
   its whole wall, ``k W(k)`` (waits at barriers included, which CPU time leaves out; its
   CPU time if larger); other stages and the training step hold their CPU time.
3. **Measurement** (:func:`choose`): the calibration's batches at every core measured
   inline's rate; the best predicted plan, unless it is inline, runs for a short window
   (the batches go to the training loop as usual; when it is kept the epoch goes on with
   its threads). The best predicted is kept unless a measured one beat it by more than
   ``NOISE``. The loader re-plans when an epoch (of at least ``DRIFT_MIN_SECONDS``) runs
   slower than ``DRIFT`` times the chosen plan's measured rate.

A plan is a plain dict (``{"name": "overlap", "pool": 2, "fetch_kernel_threads": 1}``),
so ``loader.plan`` can be saved and passed back as ``plan=``. Batches never depend on the
plan: every plan runs the same stages on the same batch positions.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from graphpipe.pipes.base import Pipe
from graphpipe.pipes.feature_fetcher import FeatureFetcher
from graphpipe.loading.stages import Timed
from graphpipe.pipes.subgraph_sampler import SubgraphSampler
from graphpipe.loading.policy import (
    batch_pool, batch_pool_targets, gpu_side_streams, one_background_thread, overlap, pinned_copy,
)
from graphpipe.loading.rewrite import find, stages
from graphpipe._internal.checks import as_int

__all__ = [
    "Calibration", "CalibrationBatch", "Plan", "StageCost", "calibrate", "candidates", "check_plan", "choose", "plan_transforms",
    "predict", "ranked", "sampled_edges", "stage_timers",
]

Plan = Dict[str, object]
COMPILE_BATCHES = 2  # batches run inline, unmeasured, first: they compile the kernels
CALIBRATION_BATCHES = 8  # batches run inline to measure the stages, half of them with kernels on one thread
# Best predicted plans measured before choosing (inline's rate comes from the calibration).
# One: a window that cannot tell plans within NOISE apart only guards against a prediction
# that is far off, and every window, with its switch of threads, costs a part of the epoch.
MEASURED_CANDIDATES = 1
WARMUP_BATCHES = 4  # batches of a candidate before its window (its threads start, fill their queues)
WINDOW_BATCHES = 12  # batches timed per candidate
# One window of WINDOW_BATCHES batches moves 15-25% from run to run on a shared VM, so a
# measured lead smaller than this does not overrule the prediction.
NOISE = 0.15
DRIFT = 0.6  # re-plan when an epoch runs below this fraction of the chosen plan's rate
DRIFT_MIN_SECONDS = 1.0  # shorter epochs are too noisy to judge


@dataclasses.dataclass(frozen=True)
class StageCost:
    """One stage's cost per batch (upstream stages excluded), wall and core-seconds, with
    numba kernels on all the cores (``wall_s``, ``cpu_s``) and on one thread (``wall_1_s``,
    ``cpu_1_s``). ``kind`` is "sampler", "fetcher" or "other"."""

    label: str
    kind: str
    wall_s: float
    cpu_s: float
    wall_1_s: float
    cpu_1_s: float


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What the inline batches measured: the stages (upstream first), the training loop's
    wall and core-seconds per batch, the cores (numba's thread count), and the mean number
    of sampled edges per batch that the stage costs are for."""

    stages: List[StageCost]
    consumer_wall_s: float
    consumer_cpu_s: float
    cores: int
    mean_edges: float


class CalibrationBatch(NamedTuple):
    """One measured inline batch: the numba threads its kernels ran on, its sampled edges,
    and the ``(wall, cpu)`` seconds each timer of :func:`stage_timers` added."""

    kernel_threads: int
    edges: int
    seconds: List[Tuple[float, float]]


def stage_timers(timed: Pipe) -> List[Timed]:
    """The timers of ``timed`` (a chain with a ``Timed`` after every stage), upstream first."""
    return [stage for stage in reversed(stages(timed)) if isinstance(stage, Timed)]


def sampled_edges(minibatch) -> int:
    """The edges of ``minibatch``'s sampled subgraphs, over its layers and edge types (0 for
    a batch without sampled subgraphs)."""
    total = 0
    for layer in getattr(minibatch, "sampled_subgraphs", None) or ():
        edges = layer.num_edges
        total += sum(edges.values()) if isinstance(edges, dict) else edges
    return total


def calibrate(
    timers: Sequence[Timed], batches: Sequence[CalibrationBatch], consumer_wall_s: float, consumer_cpu_s: float, cores: int
) -> Calibration:
    """The :class:`Calibration` of the inline ``batches`` timed by ``timers`` (upstream first).

    A stage's own time per batch is its timer's minus the one upstream's (timers include
    the stages upstream of them). Per thread count, a sampler's or fetcher's cost per
    batch is a ratio estimate, ``sum(seconds) / sum(edges) * mean edges`` (the mean over
    all ``batches``): sampling and fetching grow with the sampled edges, and the estimate
    takes out the difference in batch sizes between the batches run on all cores and
    those run on one thread. Other stages (the item sampler, your transforms), and all
    stages of batches without sampled edges, give plain means.
    """
    mean_edges = sum(batch.edges for batch in batches) / len(batches)
    costs: List[StageCost] = []
    upstream: Optional[int] = None
    for i, timer in enumerate(timers):
        if timer.batches == 0:
            continue
        inner = timer.source
        kind = "sampler" if isinstance(inner, SubgraphSampler) else "fetcher" if isinstance(inner, FeatureFetcher) else "other"
        own = []
        for k in (cores, 1):
            runs = [batch for batch in batches if batch.kernel_threads == k]
            edges = sum(batch.edges for batch in runs)
            for field in (0, 1):
                seconds = sum(b.seconds[i][field] - (b.seconds[upstream][field] if upstream is not None else 0.0) for b in runs)
                per_batch = seconds / edges * mean_edges if kind != "other" and edges > 0 else seconds / len(runs)
                own.append(max(per_batch, 0.0))
        costs.append(StageCost(inner.label(), kind, *own))
        upstream = i
    return Calibration(costs, consumer_wall_s, consumer_cpu_s, cores, mean_edges)


def candidates(cores: int, pipe: Pipe) -> List[Plan]:
    """The plans weighed for ``pipe`` on ``cores`` cores, simplest first (the first of
    plans predicted alike wins): inline, one background thread, whole batches (sampled
    and fetched in one thread) in a pool of 2 threads when a fetcher reads a sampler's
    batches (:func:`~graphpipe.loading.policy.batch_pool_targets`), and overlapped
    stages with 1, 2, 4 or 8 sampler batches at once, the fetcher's gather on a quarter
    of the cores or all of them.
    A whole-batch pool comes before the overlapped stages: it keeps as many threads busy
    as there are cores where they add the fetcher's thread, whose switches the model
    does not count (on 2 cores it ran NS 0-7% faster than the default).

    Worker processes are not weighed: they need the script's ``__main__`` guard and a
    picklable chain, which the loader cannot check before it starts them, so they stay
    the user's choice (``num_workers=``)."""
    plans: List[Plan] = [{"name": "inline"}, {"name": "one_thread"}]
    if not find(pipe, (SubgraphSampler, FeatureFetcher)):
        return plans
    pools = [p for p in (1, 2, 4, 8) if p <= cores] or [1]
    if cores >= 2 and batch_pool_targets(pipe):
        # A pool of 2 only: each thread's batches in flight hold the fetcher's output blocks
        # (FeatureFetcher keeps 8 per feature), and larger pools were not measured.
        plans.append({"name": "batch_pool", "pool": 2})
    for fetch_kernel_threads in sorted({max(1, cores // 4), cores}):
        for pool in pools:
            plans.append({"name": "overlap", "pool": pool, "fetch_kernel_threads": fetch_kernel_threads})
    return plans


# The form of each plan: its keys besides "name".
_PLAN_FORMS = {
    "inline": {},
    "one_thread": {},
    "batch_pool": {"pool": "P"},
    "overlap": {"pool": "P", "fetch_kernel_threads": "K"},
}
MAX_POOL = 64  # a plan's sampler batches at once (threads of its pool); the candidates use 1-8


def check_plan(plan) -> Plan:
    """``plan`` after checking that it is a plan (a dict from ``loader.plan``); a ValueError
    names the key and the plan's form otherwise. ``P`` (``pool``): sampler batches at once,
    one thread each, 1 to ``MAX_POOL``; ``K`` (``fetch_kernel_threads``): the fetcher's
    kernel threads, ``>= 1`` (capped at numba's thread count when it runs)."""
    name = plan.get("name") if isinstance(plan, dict) else None
    if not isinstance(name, str) or name not in _PLAN_FORMS:
        raise ValueError(
            "DataLoader: `plan` must be None, 'auto' or a plan from loader.plan (a dict whose 'name' is 'inline', "
            f"'one_thread', 'batch_pool' or 'overlap'), got {plan!r}"
        )
    keys = _PLAN_FORMS[name]
    form = "{" + ", ".join([f"'name': '{name}'"] + [f"'{key}': {letter}" for key, letter in keys.items()]) + "}"
    form += {"batch_pool": f" with P in [1, {MAX_POOL}]", "overlap": f" with P in [1, {MAX_POOL}] and K >= 1"}.get(name, "")
    missing = [key for key in keys if key not in plan]
    unknown = [key for key in plan if key != "name" and key not in keys]
    if missing or unknown:
        problems = ([f"lacks {missing}"] if missing else []) + ([f"has unknown key(s) {unknown}"] if unknown else [])
        raise ValueError(f"DataLoader: `plan` {plan!r} {' and '.join(problems)}; the form of a '{name}' plan is {form}")
    for key, maximum in (("pool", MAX_POOL), ("fetch_kernel_threads", None)):
        if key in keys:
            value = as_int(plan[key])
            if value is None or value < 1 or (maximum is not None and value > maximum):
                expected = f"an int in [1, {maximum}]" if maximum is not None else "an int >= 1"
                raise ValueError(
                    f"DataLoader: `plan['{key}']` must be {expected}, got {plan[key]!r}; the form of a '{name}' plan "
                    f"is {form}"
                )
    return plan


def plan_transforms(plan: Plan) -> List[Callable[[Pipe], Pipe]]:
    """The transforms that run ``plan`` (checked by :func:`check_plan`; GPU side streams and
    pinned copies around it, which change nothing on the CPU)."""
    name = check_plan(plan)["name"]
    if name == "inline":
        middle: List[Callable[[Pipe], Pipe]] = []
    elif name == "one_thread":
        middle = [one_background_thread]
    elif name == "overlap":
        middle = [overlap(plan["pool"], plan["fetch_kernel_threads"])]
    else:
        middle = [batch_pool(plan["pool"])]
    return [gpu_side_streams, *middle, pinned_copy]


def predict(plan: Plan, calibration: Calibration) -> float:
    """Predicted batches per second of ``plan`` (see the module docstring)."""
    costs, cores = calibration.stages, calibration.cores
    consumer = calibration.consumer_wall_s
    chain_wall = sum(cost.wall_s for cost in costs)
    name = plan["name"]
    if name == "inline":
        return _rate(chain_wall + consumer)
    if name == "one_thread":
        kernel_threads = fetch_threads = cores
    elif name == "batch_pool":
        pool = int(plan["pool"])
        kernel_threads = fetch_threads = max(1, cores // pool)
    else:
        pool, fetch_threads = int(plan["pool"]), int(plan["fetch_kernel_threads"])
        kernel_threads = max(1, cores // pool)
    threads = {"sampler": kernel_threads, "fetcher": fetch_threads, "other": cores}
    held = sum(_cores_held(cost, threads[cost.kind], cores) for cost in costs) + calibration.consumer_cpu_s
    cap = cores / held if held > 0 else float("inf")
    if name == "one_thread":
        return min(_rate(chain_wall), _rate(consumer), cap)
    # Each background stage (a sampler's pool, a fetcher's thread) ends a thread's segment;
    # the other stages run in the segment of the next one downstream (or in the loop). A
    # pool's threads work on P batches while the thread feeding it runs the stages before
    # it; in a whole-batch pool, a fetcher right after a sampler works in the same threads.
    segments: List[float] = []
    serial = 0.0
    sampled: Optional[Tuple[float, float]] = None  # the feeding thread's and the sampler's seconds
    for cost in costs:
        if cost.kind == "other":
            serial += cost.wall_s
            sampled = None
            continue
        wall = _wall(cost, threads[cost.kind], cores)
        if cost.kind == "sampler":
            sampled = (serial, wall)
            segments.append(max(serial, wall / pool))
        elif name == "batch_pool" and sampled is not None:
            segments[-1] = max(sampled[0], (sampled[1] + wall) / pool)
            sampled = None
        else:
            segments.append(serial + wall)
            sampled = None
        serial = 0.0
    segments.append(serial + consumer)
    return min(min(_rate(s) for s in segments), cap)


def _wall(cost: StageCost, threads: int, cores: int) -> float:
    """The stage's wall on ``threads`` kernel threads: ``s + p / threads`` through its walls
    on one thread and on ``cores``, with ``s, p >= 0`` (its wall on ``cores`` kept as
    measured: a kernel faster on one thread than on all is all serial, one more than
    ``cores`` times faster on all is all parallel)."""
    if cores == 1:
        return cost.wall_s
    parallel = min(max((cost.wall_1_s - cost.wall_s) * cores / (cores - 1), 0.0), cores * cost.wall_s)
    return cost.wall_s - parallel / cores + parallel / threads


def _cores_held(cost: StageCost, threads: int, cores: int) -> float:
    """Core-seconds per batch that the stage keeps from other threads: its CPU time for a
    stage without kernels; for a kernel on ``threads`` threads ``threads x wall`` (a static
    schedule waits for its slowest thread) or its CPU time if larger (CPU time taken as
    linear in the thread count between its two measurements)."""
    if cost.kind == "other":
        return cost.cpu_s
    cpu = cost.cpu_s if cores == 1 else cost.cpu_1_s + (cost.cpu_s - cost.cpu_1_s) * (threads - 1) / (cores - 1)
    return max(threads * _wall(cost, threads, cores), cpu)


def _rate(seconds: float) -> float:
    return 1.0 / seconds if seconds > 0 else float("inf")


def ranked(plans: Sequence[Plan], calibration: Calibration) -> List[Plan]:
    """``plans`` from the best predicted to the worst (ties: the earlier candidate first)."""
    return sorted(plans, key=lambda plan: -predict(plan, calibration))


def choose(rows: Sequence[Dict]) -> Dict:
    """The row of ``rows`` (``DataLoader.plan_report``: best predicted first) whose plan to
    run: the best predicted of the measured rows (a window, or inline's calibration),
    unless another measured row's rate beat its rate by more than ``NOISE``, then the
    fastest measured."""
    measured = [row for row in rows if row["measured_it_s"] is not None]
    predicted_best, fastest = measured[0], max(measured, key=lambda row: row["measured_it_s"])
    return fastest if fastest["measured_it_s"] > (1 + NOISE) * predicted_best["measured_it_s"] else predicted_best
