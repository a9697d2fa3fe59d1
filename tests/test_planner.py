import json
import time

import pytest
import torch

import graphpipe as gp
from graphpipe import planner
from graphpipe.planner import Calibration, StageCost


def _chain(n=160, batch_size=4, stage=None):
    """ItemSampler over karate seeds (cycled, shuffled, seed 3) -> [transform(stage)] -> fetch_feature."""
    data = gp.datasets.karate_club()
    items = gp.ItemSet((torch.arange(n) % 34, data.labels[torch.arange(n) % 34]), names=("seeds", "labels"))
    pipe = gp.ItemSampler(items, batch_size, shuffle=True, seed=3)
    if stage is not None:
        pipe = pipe.transform(stage)
    return pipe.fetch_feature(data.features, ["feat"])


def _summary(batches):
    return [(mb.batch_index, mb.seeds.tolist(), mb.node_features["feat"].sum().item()) for mb in batches]


def _sleep_then(seconds):
    def slow(minibatch):
        time.sleep(seconds)
        return minibatch

    return slow


def test_the_plan_never_changes_the_batches():
    pipe = _chain()
    loader = gp.DataLoader(pipe, plan="auto")
    got = [_summary(loader) for _ in range(3)]
    assert loader.plan is not None  # chosen in the second epoch (40 batches each)
    assert got == [_summary(pipe) for _ in range(3)]


def test_a_slow_stage_and_a_slow_training_step_move_the_plan_off_inline():
    """A 15 ms stage (it sleeps: no core used) and a 15 ms training step: inline takes both
    one after the other, a background thread overlaps them."""
    loader = gp.DataLoader(_chain(n=200, stage=_sleep_then(0.015)), plan="auto")
    for _ in loader:  # 50 batches: calibration takes 2 + 8 inline, then 3 candidates x 11
        time.sleep(0.015)
    assert loader.plan["name"] != "inline"
    predicted = {planner_name(row["plan"]): row["predicted_it_s"] for row in loader.plan_report}
    assert predicted["inline"] < 0.75 * max(predicted.values())
    measured = [row for row in loader.plan_report if row["measured_it_s"] is not None]
    assert len(measured) == planner.MEASURED_CANDIDATES
    chosen = next(row for row in measured if row["plan"] == loader.plan)
    assert chosen["measured_it_s"] == max(row["measured_it_s"] for row in measured)
    text = loader.explain()
    assert "chosen by plan='auto'" in text and "predicted it/s, measured it/s" in text


def planner_name(plan):
    return plan["name"] if plan["name"] != "overlap" else f"overlap{plan['pool']},{plan['fetch_kernel_threads']}"


def _calibration(sampler_wall, sampler_cpu, fetch_wall, fetch_cpu, consumer=0.001, cores=4):
    return Calibration(
        [
            StageCost("ItemSampler", "other", 0.0001, 0.0001),
            StageCost("NeighborSampler", "sampler", sampler_wall, sampler_cpu),
            StageCost("FeatureFetcher", "fetcher", fetch_wall, fetch_cpu),
        ],
        consumer, consumer, cores,
    )


def test_predictions_follow_the_cost_model():
    pool2 = {"name": "overlap", "pool": 2, "fetch_kernel_threads": 1}
    pool4 = {"name": "overlap", "pool": 4, "fetch_kernel_threads": 1}
    one = {"name": "one_thread"}
    inline = {"name": "inline"}
    # Kernels that scale on 4 cores (cpu = 4 x wall): the cores cap every plan alike.
    scaling = _calibration(0.010, 0.040, 0.002, 0.004)
    cap = 4 / (0.0001 + 0.040 + 0.004 + 0.001)
    assert planner.predict(one, scaling) == pytest.approx(min(1 / 0.0121, cap))
    assert planner.predict(pool4, scaling) == pytest.approx(cap)
    assert planner.predict(inline, scaling) == pytest.approx(1 / (0.0121 + 0.001))
    # A serial sampler kernel (cpu = wall): a pool samples 4 batches at once, one thread cannot.
    serial = _calibration(0.010, 0.010, 0.002, 0.002)
    assert planner.predict(one, serial) == pytest.approx(1 / 0.0121)
    # its threads sample 4 batches in 0.010 s (+ the item sampler in its segment), below the cores' cap
    assert planner.predict(pool4, serial) == pytest.approx(min(1 / (0.0001 + 0.010 / 4), 4 / 0.0131))
    assert planner.ranked([inline, one, pool2, pool4], serial)[0] == pool4
    # A stage that only waits (no core) and a slow training step: overlap them.
    waiting = Calibration([StageCost("Transform", "other", 0.015, 0.0)], 0.015, 0.015, 2)
    assert planner.predict(one, waiting) == pytest.approx(1 / 0.015)
    assert planner.predict(inline, waiting) == pytest.approx(1 / 0.030)


def test_a_saved_plan_runs_without_calibrating():
    pipe = _chain()
    plan = json.loads(json.dumps({"name": "overlap", "pool": 1, "fetch_kernel_threads": 1}))
    loader = gp.DataLoader(pipe, plan=plan)
    assert "Plan: overlap(pool=1, fetch_kernel_threads=1) (given)" in loader.explain()
    assert _summary(loader) == _summary(pipe)
    assert loader.plan == plan and loader.plan_report == []
    assert [stage.label() for stage in gp.transforms.find(loader.rewritten, gp.pipes.ThreadPoolMap)] == []
    assert len(gp.transforms.find(loader.rewritten, gp.pipes.Prefetcher)) == 1  # the fetcher's thread


def test_no_plan_is_the_default_transforms():
    pipe = _chain()
    assert [t.__name__ for t in gp.DataLoader(pipe, plan=None).transforms] == [
        "gpu_side_streams", "overlap_stages", "pinned_copy"
    ]


def test_bad_plans():
    with pytest.raises(ValueError, match=r"`plan` must be None, 'auto' or a plan from loader.plan"):
        gp.DataLoader(_chain(), plan="fastest")
    with pytest.raises(ValueError, match=r"pass `plan` or `transforms`/`num_workers`, not both"):
        gp.DataLoader(_chain(), plan="auto", transforms=[])


def test_resuming_inside_the_calibration():
    pipe = _chain()
    want = _summary(pipe)
    loader = gp.DataLoader(pipe, plan="auto")
    head = []
    for minibatch in loader:
        head.append(minibatch)
        if len(head) == 15:  # past the inline batches, inside a candidate's window
            break
    state = loader.state_dict()
    resumed = gp.DataLoader(pipe, plan="auto")
    resumed.load_state_dict(state)
    assert _summary(head) + _summary(resumed) == want
