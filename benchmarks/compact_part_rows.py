"""Compact part graphs: the cost of translating a layer's destinations to rows, and the bytes saved.

A part of a partitioned dataset keeps an ``indptr`` row per owned vertex only
(``CSCGraph.indptr_nodes``); each layer's destinations are mapped to rows by a binary
search. This times one layer of ``sample_neighbors`` (fanout 10) on the whole graph and on
a compact part owning every other vertex, for the same seeds (the sampled edges must be
equal), and prints the part's index bytes with a whole-graph ``indptr`` and compact.

    python benchmarks/compact_part_rows.py [--nodes 1000000] [--edges 10000000]
"""

import argparse
import time

import torch

from graphpipe.graph.csc_graph import CSCGraph


def compact_part(whole: CSCGraph, owned: torch.Tensor) -> CSCGraph:
    """The compact graph of the in-edges of ``owned`` (``[n]`` int64 ascending) in ``whole``."""
    degrees = (whole.indptr[owned + 1] - whole.indptr[owned]).to(torch.int64)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(degrees, 0)])
    positions = torch.repeat_interleave(whole.indptr[owned].to(torch.int64) - indptr[:-1], degrees) + torch.arange(int(indptr[-1]))
    rows = torch.cat([owned, torch.tensor([whole.total_num_nodes])])
    edge_ids = whole.map_edge_ids(positions)
    return CSCGraph._build(indptr.to(whole.indptr.dtype), whole.indices[positions], {}, {}, edge_ids, level="indptr", indptr_nodes=rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--edges", type=int, default=10_000_000)
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(0, args.nodes, (args.edges,), generator=generator)
    dst = torch.randint(0, args.nodes, (args.edges,), generator=generator)
    whole = CSCGraph.from_coo(src, dst, args.nodes)
    owned = torch.arange(0, args.nodes, 2)
    part = compact_part(whole, owned)
    # Both layouts hold the part's owned ids (GraphPart.nodes): int64, one per owned vertex.
    global_bytes = (args.nodes + 1) * whole.indptr.element_size() + owned.numel() * 8
    compact_bytes = part.indptr.numel() * part.indptr.element_size() + part.indptr_nodes.numel() * 8
    print(f"{args.nodes} nodes, {args.edges} edges; a part of {owned.numel()} vertices, its indptr and owned ids: "
          f"{global_bytes / 1e6:.1f} MB with a whole-graph indptr, {compact_bytes / 1e6:.1f} MB compact")
    for frontier in (1024, 16_384, 100_000):
        seeds = owned[torch.randperm(owned.numel(), generator=generator)[:frontier]].sort().values
        medians = {}
        for name, graph in (("whole", whole), ("compact", part)):
            graph.sample_neighbors(seeds, [10])
            times = []
            for _ in range(7):
                start = time.perf_counter()
                graph.sample_neighbors(seeds, [10])
                times.append(time.perf_counter() - start)
            medians[name] = sorted(times)[3] * 1e3
        torch.manual_seed(5)
        a = whole.sample_neighbors(seeds, [10])
        torch.manual_seed(5)
        b = part.sample_neighbors(seeds, [10])
        same = torch.equal(a.sampled_csc.indices, b.sampled_csc.indices) and torch.equal(a.sampled_csc.indptr, b.sampled_csc.indptr)
        same = same and torch.equal(a.original_edge_ids, b.original_edge_ids)
        print(f"{frontier:>7} destinations: whole {medians['whole']:.2f} ms, compact {medians['compact']:.2f} ms "
              f"(+{medians['compact'] - medians['whole']:.2f} ms), same edges: {same}")


if __name__ == "__main__":
    main()
