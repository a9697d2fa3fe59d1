"""The GPU benchmarks' code paths, on CPU tensors (tiny sizes), so that they do not rot
between the sessions lent a GPU; and check_targets.py's verdicts on made-up figures."""

import contextlib
import io
import json
import os
import runpy
import sys
import warnings

import pytest

GPU_BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "gpu")

SMOKE_RUNS = {
    "bench_sampling.py": (["--smoke"], "sampling"),
    "bench_uva_gather.py": (["--smoke"], "cache_gather"),
    "bench_e2e.py": (["--smoke"], "e2e"),
    "bench_cache_kappa.py": (["--nodes", "20000", "--edges", "200000", "--batches", "3", "--device", "cpu"],
                             "cache_vs_kappa"),
}


def run_script(name, args, monkeypatch):
    """Run ``benchmarks/gpu/<name>`` in this process; its JSON lines, parsed."""
    monkeypatch.syspath_prepend(GPU_BENCHMARKS)
    monkeypatch.setattr(sys, "argv", [name] + args)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pinning warns without CUDA
        runpy.run_path(os.path.join(GPU_BENCHMARKS, name), run_name="__main__")
    return [json.loads(line) for line in printed.getvalue().splitlines() if line.startswith("{")]


@pytest.mark.parametrize("name", sorted(SMOKE_RUNS))
def test_gpu_benchmark_runs_on_cpu_tensors(name, monkeypatch):
    args, bench = SMOKE_RUNS[name]
    records = run_script(name, args, monkeypatch)
    assert records and all(r["bench"] == bench for r in records)
    if bench == "sampling":  # the CPU kernels and the torch ops sample the same graph alike
        by = {(r["sampler"], r["graph_in"]): r for r in records}
        for sampler in ("NS", "LABOR-0"):
            assert by[sampler, "cpu (numba)"]["input_nodes/batch"] == by[sampler, "device memory"]["input_nodes/batch"]
    if bench == "cache_gather":
        assert {r["method"] for r in records} == {"cache_hits", "hbm_index_select", "hbm_copy"}
    if bench == "e2e":
        assert {r["store"] for r in records} >= {"no cache", "static cache 10%", "clock cache 30%"}
        assert all(0 < r["overlap efficiency"] for r in records)
    if bench == "cache_vs_kappa":
        assert [r["kappa"] for r in records] == [None, 1, 2, 4, 8, 16, 32, 64]


def test_check_targets_gives_met_missed_and_no_figures(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(GPU_BENCHMARKS)
    from check_targets import check

    figures = [
        {"bench": "uva_gather", "method": "uva", "rows": 150_000, "row_bytes": 400, "GB/s": 40.0},
        {"bench": "uva_gather", "method": "index_select_view", "rows": 150_000, "row_bytes": 400, "GB/s": 50.0},
        {"bench": "uva_gather", "method": "uva", "rows": 1_000_000, "row_bytes": 400, "GB/s": 50.0},
        {"bench": "uva_gather", "method": "memcpy", "rows": 1_000_000, "row_bytes": 400, "GB/s": 54.0},
        {"bench": "sampling", "sampler": "NS", "graph_in": "device memory", "it/s": 2000.0},
        {"bench": "e2e", "sampler": "NS", "config": "gpu sampling", "store": "no cache",
         "overlap efficiency": 0.95, "e2e it/s": 100.0},
    ]
    reference = [{"bench": "sampling", "sampler": "NS", "graph_in": "cpu (numba)", "it/s": 250.0}]
    verdicts = {measure: ok for measure, _, _, ok in check(figures, reference)}
    assert verdicts["UVA gather 150k x 400 B, sort included"] == "met"
    assert verdicts["UVA gather 150k x 400 B / torch index_select on the zero-copy view"] == "MISSED"  # 0.8x
    assert verdicts["UVA gather 1000000 x 400 B / pinned memcpy"] == "met"  # 0.93x
    assert verdicts["GPU NS [15,10,5], batch 1024, 2M nodes, graph on device / CPU on 2 cores"] == "MISSED"  # 8x
    assert verdicts["end to end NS, gpu sampling, no cache"] == "met"
    assert verdicts["cache hits (HBM gather), 150000 rows x 400 B"] == "no figures"
    assert verdicts["cache hit rate vs LABOR batch_dependency"] == "no figures"
