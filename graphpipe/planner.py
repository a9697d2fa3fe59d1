"""The execution planner behind ``DataLoader(pipe, plan="auto")``: measured costs in, a plan out.

After DAHA (Wang et al., PVLDB 2024): per-stage costs are measured on the first batches,
a cost model predicts the throughput of each candidate plan, and measurement decides.

1. **Calibration** (:func:`stage_costs`): the chain runs inline for a few batches;
   every stage's wall and core-seconds per batch (the process's CPU time: the kernels'
   threads included) and the training loop's own time between batches are measured
   (after two unmeasured batches, which pay for compiling the kernels).
2. **Prediction** (:func:`predict`): each candidate's batches per second from those
   costs. A chain in one thread runs at the sum of its stages' wall times; stages in
   their own threads run at the slowest of them; everything is capped by the cores,
   ``cores / core-seconds per batch``. A pool of ``P`` sampler threads with kernels on
   ``k = cores // P`` threads samples ``P`` batches at once, each in ``max(U / k, W)``
   (``U`` core-seconds, ``W`` wall at every core: fewer threads per kernel are never
   faster than all of them).
3. **Measurement**: the best predicted candidates run for a short window each (the
   batches go to the training loop as usual) and the fastest measured is kept. The
   loader re-plans when an epoch (of at least ``DRIFT_MIN_SECONDS``) runs slower than
   ``DRIFT`` times the chosen plan's measured rate.

A plan is a plain dict (``{"name": "overlap", "pool": 2, "fetch_kernel_threads": 1}``),
so ``loader.plan`` can be saved and passed back as ``plan=``. Batches never depend on the
plan: every plan runs the same stages on the same batch positions.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Optional, Sequence

from .pipes.base import Pipe
from .pipes.feature_fetcher import FeatureFetcher
from .pipes.stages import Timed
from .pipes.subgraph_sampler import SubgraphSampler
from .transforms.defaults import gpu_side_streams, one_background_thread, overlap, pinned_copy
from .transforms.graph import find, stages

__all__ = ["Calibration", "Plan", "StageCost", "candidates", "plan_transforms", "predict", "ranked", "stage_costs"]

Plan = Dict[str, object]
CALIBRATION_BATCHES = 8  # batches run inline to measure the stages
MEASURED_CANDIDATES = 3  # best predicted plans measured before choosing
WARMUP_BATCHES = 3  # batches of a candidate before its window (threads fill their queues)
WINDOW_BATCHES = 8  # batches timed per candidate
DRIFT = 0.6  # re-plan when an epoch runs below this fraction of the chosen plan's rate
DRIFT_MIN_SECONDS = 1.0  # shorter epochs are too noisy to judge


@dataclasses.dataclass(frozen=True)
class StageCost:
    """One stage's measured cost per batch: ``kind`` is "sampler", "fetcher" or "other"."""

    label: str
    kind: str
    wall_s: float
    cpu_s: float


@dataclasses.dataclass(frozen=True)
class Calibration:
    """What the inline batches measured: the stages (upstream first), the training loop's
    wall and core-seconds per batch, and the cores."""

    stages: List[StageCost]
    consumer_wall_s: float
    consumer_cpu_s: float
    cores: int


def stage_costs(timed: Pipe) -> List[StageCost]:
    """Per-batch costs of the stages of ``timed`` (a chain with a ``Timed`` after every
    stage, run inline), upstream first: each timer minus the one upstream of it."""
    costs: List[StageCost] = []
    previous: Optional[Timed] = None
    for stage in reversed(stages(timed)):
        if not isinstance(stage, Timed) or stage.batches == 0:
            continue
        wall = stage.seconds - (previous.seconds if previous is not None else 0.0)
        cpu = stage.cpu_seconds - (previous.cpu_seconds if previous is not None else 0.0)
        inner = stage.source
        kind = "sampler" if isinstance(inner, SubgraphSampler) else "fetcher" if isinstance(inner, FeatureFetcher) else "other"
        costs.append(StageCost(inner.label(), kind, max(wall, 0.0) / stage.batches, max(cpu, 0.0) / stage.batches))
        previous = stage
    return costs


def candidates(cores: int, pipe: Pipe) -> List[Plan]:
    """The plans weighed for ``pipe`` on ``cores`` cores: inline, one background thread,
    and overlapped stages with 1, 2, 4 or 8 sampler batches at once (at most ``cores``),
    the fetcher's gather on a quarter of the cores or all of them."""
    plans: List[Plan] = [{"name": "inline"}, {"name": "one_thread"}]
    if not find(pipe, (SubgraphSampler, FeatureFetcher)):
        return plans
    pools = [p for p in (1, 2, 4, 8) if p <= cores] or [1]
    for fetch_kernel_threads in sorted({max(1, cores // 4), cores}):
        for pool in pools:
            plans.append({"name": "overlap", "pool": pool, "fetch_kernel_threads": fetch_kernel_threads})
    return plans


def plan_transforms(plan: Plan) -> List[Callable[[Pipe], Pipe]]:
    """The transforms that run ``plan`` (GPU side streams and pinned copies around it, which
    change nothing on the CPU)."""
    name = plan.get("name") if isinstance(plan, dict) else None
    if name == "inline":
        middle: List[Callable[[Pipe], Pipe]] = []
    elif name == "one_thread":
        middle = [one_background_thread]
    elif name == "overlap":
        middle = [overlap(plan["pool"], plan["fetch_kernel_threads"])]
    else:
        raise ValueError(
            "DataLoader: `plan` must be None, 'auto' or a plan from loader.plan (a dict whose 'name' is 'inline', "
            f"'one_thread' or 'overlap'), got {plan!r}"
        )
    return [gpu_side_streams, *middle, pinned_copy]


def predict(plan: Plan, calibration: Calibration) -> float:
    """Predicted batches per second of ``plan`` (see the module docstring)."""
    costs, cores = calibration.stages, calibration.cores
    consumer = calibration.consumer_wall_s
    core_seconds = sum(c.cpu_s for c in costs) + calibration.consumer_cpu_s
    cap = cores / core_seconds if core_seconds > 0 else float("inf")
    chain_wall = sum(c.wall_s for c in costs)
    name = plan["name"]
    if name == "inline":
        return _rate(chain_wall + consumer)
    if name == "one_thread":
        return min(_rate(chain_wall), _rate(consumer), cap)
    pool, fetch_threads = int(plan["pool"]), int(plan["fetch_kernel_threads"])
    kernel_threads = max(1, cores // pool)
    # Each background stage (a sampler's pool, a fetcher's thread) ends a thread's segment;
    # the other stages run in the segment of the next one downstream (or in the loop).
    segments: List[float] = []
    serial = 0.0
    for cost in costs:
        if cost.kind == "sampler":
            segments.append(serial + max(cost.cpu_s / kernel_threads, cost.wall_s) / pool)
            serial = 0.0
        elif cost.kind == "fetcher":
            segments.append(serial + max(cost.cpu_s / fetch_threads, cost.wall_s))
            serial = 0.0
        else:
            serial += cost.wall_s
    segments.append(serial + consumer)
    return min(min(_rate(s) for s in segments), cap)


def _rate(seconds: float) -> float:
    return 1.0 / seconds if seconds > 0 else float("inf")


def ranked(plans: Sequence[Plan], calibration: Calibration) -> List[Plan]:
    """``plans`` from the best predicted to the worst (ties: the simpler plan first)."""
    return sorted(plans, key=lambda plan: -predict(plan, calibration))
