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
         "--cache-gb", "0.000002", "--batch-size", "500", "--batches", "5", "--io-threads", "2",
         "--json", str(tmp_path / "r.json")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "r.json").read_text())
    assert "num_edges=20000" in results["graph"] and "num_nodes=1000" in results["graph"]
    assert 0.0 < results["cache"]["hit_rate"] < 1.0 and results["cache"]["capacity_rows"] == 134
    for step in ("write_edges", "build_csc", "write_features", "read_cached", "read_disk"):
        assert results[step]["seconds"] >= 0
    assert os.listdir(tmp_path / "s") == []  # files removed
