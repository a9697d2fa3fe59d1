import json
import re
import time
from types import SimpleNamespace

import numba
import pytest
import torch

import graphpipe as gp
from graphpipe.loading import planner
from graphpipe.loading.planner import Calibration, CalibrationBatch, StageCost


def _chain(n=160, batch_size=4, stage=None, fanouts=None):
    """ItemSampler over karate seeds (cycled, shuffled, seed 3) -> [transform(stage)] ->
    [sample_neighbor(fanouts, seed 5)] -> fetch_feature."""
    data = gp.datasets.karate_club()
    items = gp.ItemSet((torch.arange(n) % 34, data.labels[torch.arange(n) % 34]), names=("seeds", "labels"))
    pipe = gp.ItemSampler(items, batch_size, shuffle=True, seed=3)
    if stage is not None:
        pipe = pipe.transform(stage)
    if fanouts is not None:
        pipe = pipe.sample_neighbor(data.graph, fanouts, seed=5)
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
    assert loader.plan is not None  # chosen in the first epoch (40 batches, 26 to choose)
    assert got == [_summary(pipe) for _ in range(3)]


def test_a_slow_stage_and_a_slow_training_step_move_the_plan_off_inline():
    """A 15 ms stage (it sleeps: no core used) and a 15 ms training step: inline takes both
    one after the other, a background thread overlaps them."""
    loader = gp.DataLoader(_chain(n=200, stage=_sleep_then(0.015)), plan="auto")
    for _ in loader:  # 50 batches: calibration takes 2 + 8 inline, then a window of 4 + 12
        time.sleep(0.015)
    assert loader.plan["name"] != "inline"
    predicted = {planner_name(row["plan"]): row["predicted_it_s"] for row in loader.plan_report}
    assert predicted["inline"] < 0.75 * max(predicted.values())
    measured = [row for row in loader.plan_report if row["measured_it_s"] is not None]
    # the best predicted plans' windows, and inline's rate from the calibration
    assert [row["plan"]["name"] for row in measured][-1] == "inline"
    assert len(measured) == planner.MEASURED_CANDIDATES + 1
    assert measured[-1]["measured_it_s"] == measured[-1]["predicted_it_s"]
    chosen = next(row for row in measured if row["plan"] == loader.plan)
    assert chosen is planner.choose(loader.plan_report)
    assert (1 + planner.NOISE) * chosen["measured_it_s"] >= max(row["measured_it_s"] for row in measured)
    text = loader.explain()
    assert "chosen by plan='auto'" in text and "predicted it/s, measured it/s, prediction error" in text
    # the window's prediction error, as explain() prints it
    window = measured[0]
    error = f"{window['predicted_it_s'] / window['measured_it_s'] - 1:+.0%}"
    assert any(line.split()[-1] == error and line.split()[-2] == f"{window['measured_it_s']:.1f}" for line in text.splitlines())


def test_when_inline_is_predicted_best_no_window_runs(monkeypatch):
    """Inline's rate is the calibration's own measurement: no other plan is measured."""
    true_predict = planner.predict
    monkeypatch.setattr(planner, "predict", lambda plan, cal: true_predict(plan, cal) * (10 if plan["name"] == "inline" else 1))
    pipe = _chain(n=200)
    loader = gp.DataLoader(pipe, plan="auto")
    assert _summary(loader) == _summary(pipe)
    assert loader.plan == {"name": "inline"} and loader.plan_report[0]["plan"] == loader.plan
    assert [row["plan"] for row in loader.plan_report if row["measured_it_s"] is not None] == [{"name": "inline"}]
    assert gp.transforms.find(loader.rewritten, (gp.loading.Prefetcher, gp.loading.ThreadPoolMap)) == []


def test_a_kept_window_goes_on_running(monkeypatch):
    """The epoch goes on with the window's chain when its plan is kept: no second chain of
    that plan is built in the epoch; when inline wins over the window, a chain of it is."""
    built = []
    true_transformed = gp.loading.loader._transformed
    monkeypatch.setattr(gp.loading.loader, "_transformed", lambda pipe, ts: built.append(ts) or true_transformed(pipe, ts))
    for keep_window in (True, False):
        pipe = _chain(n=200, stage=_sleep_then(0.002))
        inline_row = lambda rows: next(row for row in rows if row["plan"]["name"] == "inline")  # noqa: E731
        monkeypatch.setattr(planner, "choose", (lambda rows: rows[0]) if keep_window else inline_row)
        loader = gp.DataLoader(pipe, plan="auto")
        built.clear()
        got = []
        for minibatch in loader:
            got.append(minibatch)
            time.sleep(0.002)
        assert _summary(got) == _summary(pipe)
        window = loader.plan_report[0]
        assert window["plan"]["name"] != "inline" and window["measured_it_s"] is not None
        assert loader.plan == (window["plan"] if keep_window else {"name": "inline"})
        # the window's chain, run to the end of the epoch; or it, then inline's
        assert len(built) == (1 if keep_window else 2)


def test_an_epoch_that_ends_while_choosing_goes_on_choosing_in_the_next():
    """20 batches an epoch, 26 to choose (10 inline, a window of 16): the window is cut
    off by the end of the first epoch and runs again in the second."""
    pipe = _chain(n=80, stage=_sleep_then(0.002))
    loader = gp.DataLoader(pipe, plan="auto")
    first = _summary(loader)
    assert loader.plan is None and loader.plan_calibration is not None
    second = _summary(loader)
    assert loader.plan is not None
    assert [first, second] == [_summary(pipe) for _ in range(2)]


def planner_name(plan):
    return plan["name"] if plan["name"] != "overlap" else f"overlap{plan['pool']},{plan['fetch_kernel_threads']}"


def _calibration(sampler, fetcher, consumer=0.001, cores=4):
    """Item sampler (0.1 ms, no kernels) -> sampler -> fetcher -> training step (``consumer``
    s of one core). ``sampler`` and ``fetcher``: (wall, cpu on ``cores`` threads, wall, cpu on 1)."""
    return Calibration(
        [
            StageCost("ItemSampler", "other", 0.0001, 0.0001, 0.0001, 0.0001),
            StageCost("NeighborSampler", "sampler", *sampler),
            StageCost("FeatureFetcher", "fetcher", *fetcher),
        ],
        consumer, consumer, cores, 1000.0,
    )


def _overlap(pool, fetch_kernel_threads=1):
    return {"name": "overlap", "pool": pool, "fetch_kernel_threads": fetch_kernel_threads}


def test_predictions_follow_the_cost_model():
    one, inline = {"name": "one_thread"}, {"name": "inline"}
    # Kernels that scale perfectly on 4 cores (4x faster on 4 threads, same core-seconds):
    # every plan keeps the cores equally busy, and the cap binds them all alike.
    scaling = _calibration((0.010, 0.040, 0.040, 0.040), (0.002, 0.008, 0.008, 0.008))
    cap = 4 / (0.0001 + 0.040 + 0.008 + 0.001)
    assert planner.predict(inline, scaling) == pytest.approx(1 / (0.0001 + 0.010 + 0.002 + 0.001))
    assert planner.predict(one, scaling) == pytest.approx(cap)  # below the chain's 1 / 0.0121
    assert planner.predict(_overlap(4), scaling) == pytest.approx(cap)
    # A serial sampler kernel (as fast on 1 thread as on 4): on 4 threads it holds 4 cores
    # for its wall, in a pool of 4 each batch holds one.
    serial = _calibration((0.010, 0.010, 0.010, 0.010), (0.002, 0.002, 0.002, 0.002))
    assert planner.predict(one, serial) == pytest.approx(4 / (0.0001 + 4 * 0.010 + 4 * 0.002 + 0.001))
    # the pool's segment 1 / (0.010 / 4) is above the cores' cap
    assert planner.predict(_overlap(4), serial) == pytest.approx(4 / (0.0001 + 0.010 + 0.002 + 0.001))
    assert planner.ranked([inline, one, _overlap(2), _overlap(4)], serial)[0] == _overlap(4)
    # Amdahl through W(1) = 10 ms and W(4) = 4 ms: p = 8 ms, s = 2 ms, so W(2) = 6 ms; the
    # kernels spin (30 ms of CPU on 4 threads, 10 on 1): 16.7 ms on 2, above 2 x W(2).
    spinning = _calibration((0.004, 0.030, 0.010, 0.010), (0.002, 0.002, 0.002, 0.002))
    held = 0.0001 + (0.010 + 0.020 / 3) + 0.002 + 0.001
    assert planner.predict(_overlap(2), spinning) == pytest.approx(min(1 / (0.006 / 2), 4 / held))
    # The thread feeding a pool runs the stages before it while the pool samples: an 8 ms
    # item stage and 10 ms batches two at a time give 1 / 8 ms, not 1 / (8 + 5) ms.
    fed = Calibration(
        [StageCost("Transform", "other", 0.008, 0.0, 0.008, 0.0), StageCost("NeighborSampler", "sampler", 0.010, 0.010, 0.010, 0.010)],
        0.0, 0.0, 2, 1000.0,
    )
    assert planner.predict(_overlap(2), fed) == pytest.approx(1 / 0.008)
    # A stage that only waits (no core) and a slow training step: overlap them.
    waiting = Calibration([StageCost("Transform", "other", 0.015, 0.0, 0.015, 0.0)], 0.015, 0.015, 2, 0.0)
    assert planner.predict(one, waiting) == pytest.approx(1 / 0.015)
    assert planner.predict(inline, waiting) == pytest.approx(1 / 0.030)


def test_a_kernel_that_scales_poorly_runs_more_batches_at_once():
    """W(2) = 0.8 W(1) on 2 cores, 1-thread fetcher: a pool of 2 runs each batch's kernels
    on one core; a pool of 1 runs them on 2 threads, which hold both cores for 8 ms."""
    poor = _calibration((0.008, 0.010, 0.010, 0.010), (0.002, 0.002, 0.002, 0.002), cores=2)
    pool2, pool1 = planner.predict(_overlap(2), poor), planner.predict(_overlap(1), poor)
    # pool 2: segment 1 / (0.010 / 2) = 200, cap 2 / (0.0001 + 0.010 + 0.002 + 0.001)
    assert pool2 == pytest.approx(2 / 0.0131)
    # pool 1: segment 1 / (0.0001 + 0.008) = 123, cap 2 / (0.0001 + 2 x 0.008 + 0.002 + 0.001)
    assert pool1 == pytest.approx(2 / 0.0191)
    assert pool2 > 1.4 * pool1


def test_a_kernel_that_scales_perfectly_gives_pool_sizes_alike():
    perfect = _calibration((0.005, 0.010, 0.010, 0.010), (0.002, 0.002, 0.002, 0.002), cores=2)
    pool2, pool1 = planner.predict(_overlap(2), perfect), planner.predict(_overlap(1), perfect)
    assert pool2 == pytest.approx(2 / 0.0131)
    assert pool1 == pytest.approx(pool2, rel=0.01)


def test_a_whole_batch_pool_fetches_in_the_sampling_segment_and_wins_a_tie():
    """A pool of whole batches runs the fetcher in the sampler's segment, ``(W_s + W_f) /
    pool``; where the cores' cap binds, it and overlapped stages are predicted alike, and
    the whole-batch pool (fewer threads) ranks first."""
    batch_pool = {"name": "batch_pool", "pool": 2}
    # NS-like on 2 cores: W(1) 12 ms sampling, 4 ms fetching; the cap 2 / 16.15 ms binds.
    capped = _calibration((0.007, 0.014, 0.012, 0.012), (0.0025, 0.005, 0.004, 0.004), cores=2)
    assert planner.predict(batch_pool, capped) == pytest.approx(2 / (0.0001 + 0.012 + 0.004 + 0.001))
    assert planner.predict(batch_pool, capped) == planner.predict(_overlap(2), capped)
    assert planner.ranked([_overlap(2), batch_pool], capped)[0] == _overlap(2)
    assert planner.ranked(planner.candidates(2, _chain(fanouts=[2])), capped)[0] == batch_pool
    # A fetcher slower than the sampler (8 ms and 6 ms on one thread): in its own thread it
    # is the bottleneck (1 / 8 ms); in the pool each thread takes (6 + 8) ms a batch, two
    # at once, and the cores' cap binds (the item sampler's thread feeds the pool meanwhile).
    slow_fetch = _calibration((0.003, 0.006, 0.006, 0.006), (0.004, 0.008, 0.008, 0.008), cores=2, consumer=0.0)
    assert planner.predict(batch_pool, slow_fetch) == pytest.approx(2 / (0.0001 + 0.006 + 0.008))
    assert planner.predict(_overlap(2), slow_fetch) == pytest.approx(1 / 0.008)
    assert planner.ranked([_overlap(2), batch_pool], slow_fetch)[0] == batch_pool


def test_whole_batch_pools_are_candidates_only_where_a_fetcher_reads_a_sampler():
    names = lambda pipe: [planner_name(plan) for plan in planner.candidates(2, pipe)]  # noqa: E731
    assert names(_chain(fanouts=[2])) == ["inline", "one_thread", "batch_pool", "overlap1,1", "overlap2,1", "overlap1,2", "overlap2,2"]
    # a transform between the sampler and the fetcher: nothing to run in one thread
    data = gp.datasets.karate_club()
    split = gp.ItemSampler(gp.ItemSet(34), 4).sample_neighbor(data.graph, [2]).transform(lambda mb: mb).fetch_feature(data.features, ["feat"])
    assert "batch_pool" not in names(split)
    assert names(_chain()) == ["inline", "one_thread", "overlap1,1", "overlap2,1", "overlap1,2", "overlap2,2"]  # no sampler


def test_a_fetcher_whose_feature_is_not_safe_in_several_threads_stays_out_of_the_pool():
    """A GPU cache's reads change its slot map and clock: its fetcher keeps one thread."""
    data = gp.datasets.karate_club()
    cached = gp.gpu_cached_feature(data.features, "feat", max_bytes=10 * 34 * 4, policy="clock", device="cpu")
    pipe = gp.ItemSampler(gp.ItemSet(34), 4, shuffle=True, seed=1).sample_neighbor(data.graph, [3], seed=2).fetch_feature(cached, ["feat"])
    assert gp.loading.policy.batch_pool_targets(pipe) == []
    assert "batch_pool" not in [plan["name"] for plan in planner.candidates(2, pipe)]
    plain = gp.ItemSampler(gp.ItemSet(34), 4, shuffle=True, seed=1).sample_neighbor(data.graph, [3], seed=2).fetch_feature(data.features, ["feat"])
    assert gp.loading.policy.batch_pool_targets(plain) == [plain]
    loader = gp.DataLoader(pipe, plan={"name": "batch_pool", "pool": 2})
    assert [mb.node_features["feat"].sum().item() for mb in loader] == [mb.node_features["feat"].sum().item() for mb in plain]
    (pool,) = gp.transforms.find(loader.rewritten, gp.loading.ThreadPoolMap)
    assert pool.stages == 1 and "FeatureFetcher    runs in: thread" in loader.explain()  # its own thread


@pytest.mark.skipif(not gp.loading.policy._kernels_thread_safe(), reason="numba's workqueue layer: one background thread")
def test_a_whole_batch_pool_gives_the_plain_batches_and_says_where_they_run():
    pipe = _chain(fanouts=[3, 2])
    loader = gp.DataLoader(pipe, plan={"name": "batch_pool", "pool": 2})
    assert _summary(loader) == _summary(pipe)
    text = loader.explain()
    assert "Plan: batch_pool(pool=2) (given)" in text
    kernels = "pool of 2 threads, kernels on " + ("1 thread" if numba.get_num_threads() < 4 else f"{numba.get_num_threads() // 2} threads")
    assert f"NeighborSampler   runs in: {kernels}" in text and f"FeatureFetcher    runs in: {kernels}" in text
    (pool,) = gp.transforms.find(loader.rewritten, gp.loading.ThreadPoolMap)
    assert pool.stages == 2 and [type(s).__name__ for s in pool.wrapped_stages()] == ["FeatureFetcher", "NeighborSampler"]
    row = loader.stats()["NeighborSampler + FeatureFetcher in ThreadPoolMap(2)"]
    assert row["batches"] == len(pipe) and row["work_s"] > 0 and row["where"] == kernels


def test_a_measured_lead_within_the_noise_keeps_the_best_predicted():
    def rows(*measured):
        return [{"plan": _overlap(pool), "predicted_it_s": 40.0 - pool, "measured_it_s": m} for pool, m in enumerate(measured, 1)]

    within = rows(30.0, 34.0, None)  # 34 < 1.15 x 30
    assert planner.choose(within) is within[0]
    beyond = rows(30.0, 35.0, 34.0)  # 35 > 1.15 x 30
    assert planner.choose(beyond) is beyond[1]
    slower = rows(30.0, 20.0, 25.0)
    assert planner.choose(slower) is slower[0]


def test_stage_costs_are_ratio_estimates_on_the_sampled_edges():
    """Batches on 2 threads have 100 edges, on 1 thread 300: a fetcher at 0.1 ms per edge
    costs the same per batch of the mean 200 edges at both counts, although its plain means
    differ threefold. The item sampler, 1 ms a batch whatever its edges, is a plain mean."""
    pipe = _chain()  # ItemSampler -> FeatureFetcher
    timers = [SimpleNamespace(batches=4, source=pipe.source), SimpleNamespace(batches=4, source=pipe)]
    small = CalibrationBatch(2, 100, [(0.001, 0.001), (0.011, 0.021)])
    large = CalibrationBatch(1, 300, [(0.001, 0.001), (0.031, 0.031)])
    calibration = planner.calibrate(timers, [small, large, small, large], 0.002, 0.001, 2)
    items, fetcher = calibration.stages
    assert (items.label, items.kind, fetcher.kind) == (pipe.source.label(), "other", "fetcher")
    assert calibration.mean_edges == 200
    assert (fetcher.wall_s, fetcher.cpu_s, fetcher.wall_1_s, fetcher.cpu_1_s) == pytest.approx((0.020, 0.040, 0.020, 0.020))
    assert (items.wall_s, items.wall_1_s) == pytest.approx((0.001, 0.001))
    no_edges = planner.calibrate(timers, [small._replace(edges=0), large._replace(edges=0)], 0.002, 0.001, 2)
    assert (no_edges.stages[1].wall_s, no_edges.stages[1].wall_1_s) == pytest.approx((0.010, 0.030))
    assert (no_edges.consumer_wall_s, no_edges.mean_edges) == (0.002, 0)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 numba threads")
def test_the_calibration_alternates_kernel_threads_and_the_loop_keeps_its_own():
    kernel_threads = []

    def record(minibatch):
        kernel_threads.append(numba.get_num_threads())
        return minibatch

    pipe = _chain(stage=record, fanouts=[3, 2])
    caller = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        loader = gp.DataLoader(pipe, plan="auto")
        loop_threads = [numba.get_num_threads() for _ in loader]
    finally:
        numba.set_num_threads(caller)
    inline = planner.COMPILE_BATCHES + planner.CALIBRATION_BATCHES
    assert loop_threads == [2] * 40
    assert kernel_threads[:inline] == [2, 1] * (inline // 2)
    calibration = loader.plan_calibration
    assert calibration.cores == 2
    assert [cost.kind for cost in calibration.stages] == ["other", "other", "sampler", "fetcher"]
    edges = [planner.sampled_edges(mb) for mb in pipe][planner.COMPILE_BATCHES : inline]
    assert calibration.mean_edges == pytest.approx(sum(edges) / len(edges)) and calibration.mean_edges > 0
    text = loader.explain()
    assert f"per batch of {calibration.mean_edges:.0f} sampled edges" in text


def test_a_saved_plan_runs_without_calibrating():
    pipe = _chain()
    plan = json.loads(json.dumps({"name": "overlap", "pool": 1, "fetch_kernel_threads": 1}))
    loader = gp.DataLoader(pipe, plan=plan)
    assert "Plan: overlap(pool=1, fetch_kernel_threads=1) (given)" in loader.explain()
    assert _summary(loader) == _summary(pipe)
    assert loader.plan == plan and loader.plan_report == []
    assert [stage.label() for stage in gp.transforms.find(loader.rewritten, gp.loading.ThreadPoolMap)] == []
    assert len(gp.transforms.find(loader.rewritten, gp.loading.Prefetcher)) == 1  # the fetcher's thread


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


@pytest.mark.parametrize(
    "plan, says",
    [
        ({"name": "overlap", "fetch_kernel_threads": 1}, r"`plan` \{'name': 'overlap', 'fetch_kernel_threads': 1\} lacks \['pool'\]"),
        ({"name": "overlap", "pool": 100_000, "fetch_kernel_threads": 1}, r"`plan\['pool'\]` must be an int in \[1, 64\], got 100000"),
        ({"name": "batch_pool", "pool": "2"}, r"`plan\['pool'\]` must be an int in \[1, 64\], got '2'"),
        ({"name": "overlap", "pool": 2, "fetch_kernel_threads": 0}, r"`plan\['fetch_kernel_threads'\]` must be an int >= 1, got 0"),
        ({"name": "inline", "pool": 2}, r"has unknown key\(s\) \['pool'\]; the form of a 'inline' plan is \{'name': 'inline'\}$"),
    ],
)
def test_a_plan_without_its_keys_or_with_a_huge_pool_is_refused_with_its_form(plan, says):
    with pytest.raises(ValueError, match=says):
        gp.DataLoader(_chain(), plan=plan)
    name = plan["name"]
    form = {"overlap": "{'name': 'overlap', 'pool': P, 'fetch_kernel_threads': K} with P in [1, 64] and K >= 1",
            "batch_pool": "{'name': 'batch_pool', 'pool': P} with P in [1, 64]", "inline": "{'name': 'inline'}"}[name]
    with pytest.raises(ValueError, match=re.escape(f"the form of a '{name}' plan is {form}")):
        gp.DataLoader(_chain(), plan=plan)


def test_resuming_inside_the_calibration(monkeypatch):
    true_predict = planner.predict  # one_thread predicted best: a window runs after the inline batches
    monkeypatch.setattr(planner, "predict", lambda plan, cal: true_predict(plan, cal) * (10 if plan["name"] == "one_thread" else 1))
    pipe = _chain()
    want = _summary(pipe)
    loader = gp.DataLoader(pipe, plan="auto")
    head = []
    for minibatch in loader:
        head.append(minibatch)
        if len(head) == 15:  # past the inline batches, inside a candidate's window
            state = loader.state_dict()  # a checkpoint taken in the loop, as in training
            break
    resumed = gp.DataLoader(pipe, plan="auto")
    resumed.load_state_dict(state)
    assert _summary(head) + _summary(resumed) == want
