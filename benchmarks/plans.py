"""The planner (``DataLoader(plan="auto")``) against every fixed plan, side by side in one run.

    OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=10000 .venv/bin/python benchmarks/plans.py

On the GraphBolt comparison graph (``synthetic_node_classification``, 2M nodes by
default; fanouts [15, 10, 5], batch 1024, features fetched), for neighbor sampling and
LABOR-0: end-to-end it/s of a loader running each candidate plan given as ``plan=``,
of the default transforms (``plan=None``) and of ``plan="auto"`` (timed after its
calibration: it has chosen by then). One loader per plan, whose epochs follow each other
as in training; each figure is the median over ``--rounds`` rounds taken in turn, each
round starting one plan later. Prints, per sampler, every candidate's predicted it/s (from
the auto loader's calibration) next to its measured it/s, auto's rate as a fraction of
the best fixed plan's, and what the calibration costs: the first epoch of a new
``plan="auto"`` loader less the first epoch of a new loader given the plan auto chose
(both after the kernels are compiled; each the median of ``--epochs`` new loaders, taken
in turn), as a fraction of that epoch.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import graphpipe as gp  # noqa: E402
from common import measure_rate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-nodes", type=int, default=2_000_000)
    parser.add_argument("--avg-degree", type=int, default=34)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=6)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--window", type=int, default=30)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    data = gp.datasets.synthetic_node_classification(num_nodes=args.num_nodes, avg_degree=args.avg_degree, seed=0)

    def chain(method):
        items = gp.ItemSampler(data.train_set, args.batch_size, shuffle=True, seed=0)
        sampled = getattr(items, method)(data.graph, [15, 10, 5], seed=0)
        return sampled.fetch_feature(data.features, ["feat"])

    def first_epoch_s(loader) -> float:
        start = time.perf_counter()
        for _ in loader:
            pass
        return time.perf_counter() - start

    for method, name in (("sample_neighbor", "NS"), ("sample_layer_neighbor", "LABOR-0")):
        for _ in itertools.islice(chain(method), 3):  # compile (or load) the kernels
            pass
        autos, auto_epochs, fixed_epochs = [], [], []
        for _ in range(args.epochs):
            autos.append(gp.DataLoader(chain(method), plan="auto"))
            auto_epochs.append(first_epoch_s(autos[-1]))
            fixed_epochs.append(first_epoch_s(gp.DataLoader(chain(method), plan=autos[-1].plan)))
        auto = autos[0]
        plans = {"auto": "auto", "default (plan=None)": None}
        plans.update({_name(row["plan"]): row["plan"] for row in auto.plan_report})
        # One loader per plan, used for every round as auto's is: each round is its next
        # epoch, as in training (a new loader per round would replay epoch 0's batches,
        # which measured 2-3% faster than later epochs of the same loader).
        loaders = {label: auto if plan == "auto" else gp.DataLoader(chain(method), plan=plan) for label, plan in plans.items()}
        rates = {label: [] for label in plans}
        labels = list(plans)
        for round_ in range(args.rounds):
            # Each round starts one plan later: none is always measured first (right after
            # the calibration, or after the same neighbour's threads were stopped).
            for label in labels[round_ % len(labels) :] + labels[: round_ % len(labels)]:
                measured = measure_rate(loaders[label], args.warmup, args.windows, args.window)
                rates[label].append(measured["it_per_s"])
                print(f"  {name} {label}: {measured['it_per_s']:.1f} it/s", file=sys.stderr, flush=True)
        median = {label: statistics.median(values) for label, values in rates.items()}
        best_fixed = max(value for label, value in median.items() if label != "auto")
        print(f"\n### {name} end to end, batch {args.batch_size}, {data.graph.num_nodes:,} nodes, "
              f"{args.rounds} rounds (median)\n")
        print("| plan | predicted it/s | measured it/s (calibration window) | measured it/s (this run) |")
        print("|---|---|---|---|")
        for row in auto.plan_report:
            window = "-" if row["measured_it_s"] is None else f"{row['measured_it_s']:.1f}"
            print(f"| {_name(row['plan'])} | {row['predicted_it_s']:.1f} | {window} | {median[_name(row['plan'])]:.1f} |")
        print(f"| default (plan=None) | | | {median['default (plan=None)']:.1f} |")
        print(f"| **auto: {_name(auto.plan)}** | | | {median['auto']:.1f} |")
        print(f"\nauto / best fixed plan: {median['auto'] / best_fixed:.2f}; "
              f"auto / default: {median['auto'] / median['default (plan=None)']:.2f}")
        cost_s = statistics.median(auto_epochs) - statistics.median(fixed_epochs)
        print(f"calibration: first epoch of a new auto loader {statistics.median(auto_epochs):.2f} s, of a new loader "
              f"given its plan {statistics.median(fixed_epochs):.2f} s (medians of {args.epochs}): "
              f"{cost_s:+.2f} s = {cost_s / statistics.median(fixed_epochs):+.1%} of an epoch; "
              f"plans chosen: {', '.join(_name(a.plan) for a in autos)}")
        print("\n" + auto.explain())


def _name(plan) -> str:
    extra = ", ".join(f"{key}={value}" for key, value in plan.items() if key != "name")
    return f"{plan['name']}({extra})" if extra else plan["name"]


if __name__ == "__main__":
    main()
