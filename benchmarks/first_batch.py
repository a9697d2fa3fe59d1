"""Time to the first batch of a fresh process: numba compilation, cold and warm cache.

A new user's first run compiles graphpipe's numba kernels; later runs load them from
numba's on-disk cache. Each measurement runs in a new Python process that imports
graphpipe, generates the README's dataset (``synthetic_node_classification(200_000)``),
builds the README's pipe (fanouts [15, 10, 5], batches of 1024, feature fetch) and times
``gp.DataLoader(pipe)`` to its first batch, then the next batch.

* cold: ``NUMBA_CACHE_DIR`` is a new empty directory (nothing compiled yet, as after
  ``pip install``); every kernel the process runs is compiled, the dataset's included.
* warm: the same directory again, now filled by the cold run.

Reported per sampler (``ns`` = sample_neighbor, ``labor0`` = sample_layer_neighbor):
seconds of wall time and of the process's CPU time (all threads) for the import, the
dataset, and loader-to-first-batch; a second batch shows the steady state. CPU time is
the steadier number on a shared machine; the load average is printed with each run.

    python benchmarks/first_batch.py                       # ns and labor0, cold then warm, 2 rounds
    python benchmarks/first_batch.py --samplers labor0 --rounds 3

Nothing here asserts a timing (targets: first batch within 10 s for ns and 15 s for
labor0 after building the loader on 2 cores with an empty cache, under 1 s warm).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Runs in the child process; prints one JSON line.
CHILD = r"""
import json, os, resource, sys, time

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

times = {}
wall, c = time.perf_counter(), cpu()
import graphpipe as gp
times["import"] = (time.perf_counter() - wall, cpu() - c)
wall, c = time.perf_counter(), cpu()
ds = gp.datasets.synthetic_node_classification(num_nodes=NUM_NODES, seed=0)
times["dataset"] = (time.perf_counter() - wall, cpu() - c)
pipe = gp.ItemSampler(ds.train_set, batch_size=1024, shuffle=True, seed=0)
if SAMPLER == "ns":
    pipe = pipe.sample_neighbor(ds.graph, [15, 10, 5], seed=0)
else:
    pipe = pipe.sample_layer_neighbor(ds.graph, [15, 10, 5], seed=0)
pipe = pipe.fetch_feature(ds.features, node_feature_keys=["feat"]).copy_to("cpu")
wall, c = time.perf_counter(), cpu()
loader = gp.DataLoader(pipe)
batches = iter(loader)
next(batches)
times["first_batch"] = (time.perf_counter() - wall, cpu() - c)
wall, c = time.perf_counter(), cpu()
next(batches)
times["next_batch"] = (time.perf_counter() - wall, cpu() - c)
loader.close()
loader.compile_job.wait()  # its helper process may still be caching kernels the batches did not need
print(json.dumps({name: [round(w, 2), round(t, 2)] for name, (w, t) in times.items()}))
"""


def run_child(sampler: str, cache_dir: str, num_nodes: int, root: str) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("GOMP_SPINCOUNT", "10000")
    code = CHILD.replace("NUM_NODES", str(num_nodes)).replace("SAMPLER", repr(sampler))
    # cwd=root: ``python -c`` puts the working directory first on sys.path.
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"child failed:\n{done.stdout}\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr.strip()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samplers", nargs="+", default=["ns", "labor0"], choices=["ns", "labor0"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--num-nodes", type=int, default=200_000)
    parser.add_argument(
        "--graphpipe", nargs="+", default=[ROOT], metavar="DIR",
        help="checkouts to time, interleaved (default: this one), e.g. an older commit's for a before/after",
    )  # fmt: skip
    args = parser.parse_args()
    print("times are [wall s, CPU s]", flush=True)
    for round_ in range(args.rounds):
        for sampler in args.samplers:
            for root in args.graphpipe:
                with tempfile.TemporaryDirectory(prefix="numba-cache-") as cache_dir:
                    for cache in ("cold", "warm"):
                        load = os.getloadavg()[0]
                        result = run_child(sampler, cache_dir, args.num_nodes, root)
                        notice = result.pop("stderr")
                        line = {"round": round_, "sampler": sampler, "cache": cache, "load": round(load, 2), **result}
                        if len(args.graphpipe) > 1:
                            line = {"graphpipe": root, **line}
                        print(json.dumps(line), flush=True)
                        if notice:
                            print(f"  stderr: {notice}", flush=True)


if __name__ == "__main__":
    main()
