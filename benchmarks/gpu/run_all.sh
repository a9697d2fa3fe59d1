#!/usr/bin/env bash
# Every GPU check of issue 20 in one command, for the lent GPU machine (no package
# registry there; its python3 has torch with CUDA, triton, numba, pytest, pytest-xdist,
# pytest-timeout). From the repository root:
#
#     bash benchmarks/gpu/run_all.sh            # budget 400 s
#     GPU_RUN_BUDGET_S=200 GPU_RUN_STEPS="cuda-tests uva" bash benchmarks/gpu/run_all.sh
#
# Steps, in this order, each under its own time limit so that a hang costs one step, not
# the run (stopped with SIGINT first, so pytest still names its failures): cuda-tests
# (`pytest -m cuda`), sampling, uva (UVA gather + cache hits), e2e-ns, gpu-tests (the rest
# of tests/gpu, on the device), e2e-labor. GPU_RUN_STEPS picks some, and can add uva-sweep
# (the UVA kernel's tile and grid sizes, to tune its defaults), hot-reuse (issue 33's benchmark
# with the model on the GPU and the hot rows on the CPU, as NeutronOrch runs), kappa
# (cache hit rate vs LABOR's kappa: it does not depend on the device and was measured on
# CPU) and suite (the whole suite with the time left: what breaks only where CUDA is present).
# Writes to $OUT (default /tmp/graphpipe-gpu-run): env.txt, tests.log, bench.log,
# figures.jsonl (one JSON line per measurement) and summary.md (figures against the
# issue's targets, from check_targets.py). Runs without a GPU too (tests skip, the
# benchmarks say they need CUDA): that is how it is checked here.
set -u
cd "$(dirname "$0")/../.."
OUT="${OUT:-/tmp/graphpipe-gpu-run}"
mkdir -p "$OUT"
BUDGET_S="${GPU_RUN_BUDGET_S:-400}"
STEPS="${GPU_RUN_STEPS:-cuda-tests sampling uva e2e-ns gpu-tests e2e-labor}"
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-/tmp/graphpipe-numba-cache}"
START=$(date +%s)

left() { echo $((BUDGET_S - ($(date +%s) - START))); }

# step NAME LIMIT_S LOG CMD...: run CMD under min(LIMIT_S, time left), appending to LOG.
step() {
    local name=$1 limit=$2 log=$3
    shift 3
    case " $STEPS " in *" $name "*) ;; *) return ;; esac
    local remaining
    remaining=$(left)
    if [ "$remaining" -lt 20 ]; then
        echo "## $name: skipped, ${remaining} s of the budget left" | tee -a "$OUT/summary_steps.txt"
        return
    fi
    [ "$limit" -gt "$remaining" ] && limit=$remaining
    local t0=$(date +%s)
    echo "## $name (limit ${limit} s): $*" >>"$log"
    timeout -s INT -k 10 "$limit" "$@" >>"$log" 2>&1
    local rc=$?
    local line="## $name: rc=$rc in $(($(date +%s) - t0)) s (limit ${limit} s)"
    echo "$line" | tee -a "$log" >>"$OUT/summary_steps.txt"
    echo "$line"
}

# bench NAME LIMIT_S CMD...: as step, JSON lines (stdout) to figures.jsonl, the rest to bench.log.
bench() {
    local name=$1 limit=$2
    shift 2
    step "$name" "$limit" "$OUT/bench.log" bash -c 'exec "$@" > >(tee -a "$0" >&2)' "$OUT/figures.jsonl" "$@"
}

: >"$OUT/summary_steps.txt"
: >"$OUT/figures.jsonl"
{
    date -u
    nvidia-smi 2>&1 | head -15
    "$PY" - <<'EOF'
import os, sys
print("python", sys.version.split()[0], "cores", len(os.sched_getaffinity(0)))
for name in ("torch", "triton", "numba", "numpy", "cupy", "pytest", "xdist", "pytest_timeout"):
    try:
        module = __import__(name)
        print(name, getattr(module, "__version__", "present"))
    except Exception as error:  # a missing or broken package: say which
        print(name, "MISSING", type(error).__name__, error)
import torch
print("cuda", torch.cuda.is_available(), torch.version.cuda,
      torch.cuda.get_device_name() if torch.cuda.is_available() else "")
import graphpipe
print("graphpipe imports from", graphpipe.__file__)
EOF
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

PYTEST=("$PY" -m pytest -v -p no:cacheprovider -rfE --continue-on-collection-errors)
"$PY" -c "import pytest_timeout" 2>/dev/null && PYTEST+=(--timeout 120)
XDIST=()
"$PY" -c "import xdist" 2>/dev/null && XDIST=(-n 4)

step cuda-tests 150 "$OUT/tests.log" "${PYTEST[@]}" "${XDIST[@]}" -m cuda tests
bench sampling 60 "$PY" benchmarks/gpu/bench_sampling.py --on gpu --iters 100 --profile
bench uva 60 "$PY" benchmarks/gpu/bench_uva_gather.py --table-gb 4 --row-bytes 400 2048 \
    --rows 150000 1000000 --cache-gb 4
bench uva-sweep 40 "$PY" benchmarks/gpu/bench_uva_gather.py --table-gb 4 --row-bytes 400 --rows 150000 1000000 \
    --cache-gb 0 --sweep
bench e2e-ns 90 "$PY" benchmarks/gpu/bench_e2e.py --log2-nodes 21 --sampler NS --batches 100
step gpu-tests 60 "$OUT/tests.log" "${PYTEST[@]}" "${XDIST[@]}" -m "not cuda" tests/gpu
bench e2e-labor 60 "$PY" benchmarks/gpu/bench_e2e.py --log2-nodes 21 --sampler LABOR-0 --batches 100
bench hot-reuse 120 "$PY" benchmarks/hot_reuse.py --device cuda --epochs 3
bench kappa 60 "$PY" benchmarks/gpu/bench_cache_kappa.py --device cuda --batches 60
full_xdist=()
"$PY" -c "import xdist" 2>/dev/null && full_xdist=(-n 8)
step suite 600 "$OUT/tests.log" "${PYTEST[@]}" "${full_xdist[@]}" tests

"$PY" benchmarks/gpu/check_targets.py "$OUT/figures.jsonl" --steps "$OUT/summary_steps.txt" >"$OUT/summary.md" 2>&1
cat "$OUT/summary.md"
