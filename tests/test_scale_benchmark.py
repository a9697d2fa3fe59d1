"""benchmarks/scale.py runs end to end at a tiny size (the papers100M run is done by hand)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_scale_harness_runs_tiny(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--dir", str(tmp_path / "s"), "--num-nodes", "1000",
         "--num-edges", "20000", "--feature-dim", "4", "--chunk-edges", "3000", "--block-edges", "5000",
         "--memory-limit-gb", "0", "--fio-seconds", "0", "--train-seeds", "400", "--batch-size", "20",
         "--fanouts", "3", "2", "--warmup", "2", "--cache-warmup", "4", "--windows", "2", "--window", "3", "--io-threads", "2",
         "--json", str(tmp_path / "r.json")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    assert "num_edges=20000" in results["graph"] and "num_nodes=1000" in results["graph"]
    for step in ("write_edges", "build_csc", "write_features", "sample", "memmap", "disk_cache_0", "disk_cache_0.3"):
        assert results[step]["seconds"] > 0
    assert results["sample"]["it_per_s"] > 0 and results["sample"]["input_nodes_per_batch"] > 20
    # The same batches were measured (the harness checks each row's value); the cached
    # variants measure later batches, after filling their caches.
    assert results["memmap"]["rows_per_batch"] == results["disk_cache_0"]["rows_per_batch"] > 20
    assert results["disk_cache_0.1"]["rows_per_batch"] == results["disk_cache_0.3"]["rows_per_batch"] > 20
    assert results["disk_cache_0"]["hit_rate"] == 0.0
    assert 0.0 < results["disk_cache_0.3"]["hit_rate"] < 1.0
    assert results["disk_cache_0.3"]["disk_rows_per_s"] < results["disk_cache_0.3"]["rows_per_batch"] * results["disk_cache_0.3"]["it_per_s"]
    assert os.listdir(tmp_path / "s") == []  # files removed
