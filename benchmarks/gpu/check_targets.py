"""Issue 20's targets against the figures of a GPU run, as a markdown table.

    python benchmarks/gpu/check_targets.py FIGURES.jsonl [--cpu-reference cpu_reference.jsonl] [--steps STEPS.txt]

``FIGURES.jsonl`` holds the JSON lines the GPU benchmarks print (``run_all.sh`` collects
them). The GPU sampling target is relative to graphpipe's CPU sampling on the project's
2-core machine, which ``bench_sampling.py --on cpu`` measured there (``cpu_reference.jsonl``
beside this file). A target whose figures are missing is reported as such, not passed.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Callable, Iterable, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path: str) -> List[dict]:
    records = []
    if os.path.exists(path):
        with open(path) as lines:
            for line in lines:
                line = line.strip()
                if line.startswith("{"):
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:  # a line cut short when its step was stopped
                        continue
    return records


def pick(records: Iterable[dict], **match) -> List[dict]:
    return [r for r in records if all(r.get(k) == v for k, v in match.items())]


def only(records: List[dict], field: str) -> Optional[float]:
    """The median of ``field`` over ``records`` (a run may repeat a measurement)."""
    values = sorted(r[field] for r in records if field in r)
    return values[len(values) // 2] if values else None


def verdict(ok: Optional[bool]) -> str:
    return "no figures" if ok is None else ("met" if ok else "MISSED")


def check(figures: List[dict], cpu_reference: List[dict]) -> List[tuple]:
    """Rows ``(measure, target, measured, verdict)``."""
    rows = []

    def row(measure: str, target: str, measured: str, ok: Optional[bool]):
        rows.append((measure, target, measured, verdict(ok)))

    def both(x, y, test: Callable[[float, float], bool]) -> Optional[bool]:
        return None if x is None or y is None else test(x, y)

    uva = pick(figures, bench="uva_gather")
    gbs = lambda method, **kw: only(pick(uva, method=method, **kw), "GB/s")  # noqa: E731
    small_uva, small_ref = gbs("uva", rows=150_000, row_bytes=400), gbs("index_select_view", rows=150_000, row_bytes=400)
    row("UVA gather 150k x 400 B, sort included", ">= 30 GB/s", f"{small_uva} GB/s",
        None if small_uva is None else small_uva >= 30)
    row("UVA gather 150k x 400 B / torch index_select on the zero-copy view", ">= 0.9",
        f"{small_uva} / {small_ref} GB/s", both(small_uva, small_ref, lambda x, y: x >= 0.9 * y))
    for rows_, row_bytes in sorted({(r["rows"], r["row_bytes"]) for r in uva if r["rows"] >= 512_000}):
        x, y = gbs("uva", rows=rows_, row_bytes=row_bytes), gbs("memcpy", rows=rows_, row_bytes=row_bytes)
        row(f"UVA gather {rows_} x {row_bytes} B / pinned memcpy", ">= 0.9", f"{x} / {y} GB/s",
            both(x, y, lambda a, b: a >= 0.9 * b))
    if not any(r["rows"] >= 512_000 for r in uva):
        row("UVA gather >= 512k rows / pinned memcpy", ">= 0.9", "-", None)

    hits = pick(figures, bench="cache_gather")
    for rows_ in sorted({r["rows"] for r in hits}) or [150_000]:
        x = only(pick(hits, method="cache_hits", rows=rows_), "GB/s")
        y = only(pick(hits, method="hbm_index_select", rows=rows_), "GB/s")
        copy = only(pick(hits, method="hbm_copy", rows=rows_), "GB/s")
        row(f"cache hits (HBM gather), {rows_} rows x 400 B", ">= 700 GB/s",
            f"{x} GB/s (index_select on the cache table: {y}; contiguous device copy: {copy})",
            None if x is None else x >= 700)

    cpu_ns = only(pick(cpu_reference, bench="sampling", sampler="NS"), "it/s")
    gpu_ns = only(pick(figures, bench="sampling", sampler="NS", graph_in="device memory"), "it/s")
    row("GPU NS [15,10,5], batch 1024, 2M nodes, graph on device / CPU on 2 cores", ">= 20x",
        f"{gpu_ns} / {cpu_ns} it/s", both(gpu_ns, cpu_ns, lambda g, c: g >= 20 * c))
    for r in pick(figures, bench="sampling"):
        if r["graph_in"] != "cpu (numba)":
            rows.append((f"(report) {r['sampler']} sampling, graph in {r['graph_in']}", "-", f"{r['it/s']} it/s", "-"))

    for r in pick(figures, bench="e2e"):
        if r["config"].startswith("gpu"):
            row(f"end to end {r['sampler']}, {r['config']}, {r['store']}", "overlap efficiency >= 0.9",
                f"{r['overlap efficiency']} ({r['e2e it/s']} it/s)", r["overlap efficiency"] >= 0.9)
    if not any(r["config"].startswith("gpu") for r in pick(figures, bench="e2e")):
        row("end to end, GPU sampling + cache + UVA fetch + GraphSAGE step", "overlap efficiency >= 0.9", "-", None)

    curve = sorted((r["kappa"], r["hit_rate"]) for r in pick(figures, bench="cache_vs_kappa", sampler="LABOR-0"))
    rises = None if len(curve) < 2 else curve[-1][1] > curve[0][1]
    row("cache hit rate vs LABOR batch_dependency", "rises with kappa",
        ", ".join(f"k={k}: {h}" for k, h in curve) or "-", rises)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("figures")
    parser.add_argument("--cpu-reference", default=os.path.join(HERE, "cpu_reference.jsonl"))
    parser.add_argument("--steps", help="run_all.sh's step lines, copied above the table")
    args = parser.parse_args()
    figures = load(args.figures)
    devices = sorted({r.get("device", "?") for r in figures})
    print(f"# GPU run: {', '.join(devices) or 'no figures'}\n")
    if args.steps and os.path.exists(args.steps):
        with open(args.steps) as steps:
            print("".join(f"    {line}" for line in steps), end="\n")
    print("| measure | target | measured | verdict |\n| --- | --- | --- | --- |")
    for measure, target, measured, ok in check(figures, load(args.cpu_reference)):
        print(f"| {measure} | {target} | {measured} | {ok} |")


if __name__ == "__main__":
    main()
