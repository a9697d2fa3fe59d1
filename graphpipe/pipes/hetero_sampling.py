"""The layer loop of :class:`~graphpipe.SubgraphSampler` on typed (heterogeneous) graphs.

Every id here is type-local (a node's position among the nodes of its type), as in
GraphBolt's heterogeneous MiniBatches; the graph's kernels see global ids
(``node_type_offset[type] + local``). Per layer:

1. every edge type ``t = src:rel:dst`` with a non-zero fanout gets one segment per
   destination of type ``dst`` (all of them in block layout, the ones the previous
   layer added in pyg layout), ordered by edge type, then destination;
2. one call of the sampler's :meth:`sample_segments` samples them all
   (:func:`~graphpipe.ops.typed_sampling.sample_typed_layer`);
3. each node type's sources (from every edge type that starts at it) are
   unique-and-compacted against that type's destinations, so every type's sources
   are its destinations followed by its new nodes, ascending.

The result is GraphBolt's heterogeneous layout: ``sampled_csc`` per edge type (indptr
over the destinations of type ``dst``, indices local to the sources of type ``src``),
node ids per node type, edge ids per edge type (ids within the type), and
``edge_weights`` per edge type when the sampler weights edges. Every node type and edge
type of the graph has an entry, empty where nothing was sampled.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List

import torch

from ..csc_graph import parse_edge_type
from ..minibatch import CSCFormat, MiniBatch, SampledSubgraph
from ..ops import unique_and_compact
from ..ops.typed_sampling import sample_typed_layer
from ..validation import check_node_ids

__all__ = ["check_typed_seeds", "sample_hetero_subgraphs"]


def check_typed_seeds(seeds, graph, where: str) -> Dict[str, torch.Tensor]:
    """``seeds`` (node type -> ``[n]`` type-local ids) checked against ``graph``, as int64
    tensors, with an empty entry for every node type not given."""
    node_types = graph.node_types
    if not isinstance(seeds, dict):
        raise ValueError(
            f"{where}: the graph is heterogeneous, so `seeds` must be a dict of node type -> ids (from a "
            f"HeteroItemSet), got {type(seeds).__name__}; node types: {node_types}"
        )
    counts = graph.num_nodes_per_type
    out = {}
    for node_type, ids in seeds.items():
        if node_type not in counts:
            raise ValueError(f"{where}: `seeds` has unknown node type {node_type!r}; the graph's node types: {node_types}")
        if isinstance(ids, torch.Tensor) and ids.dim() == 2:
            raise NotImplementedError(
                f"{where}: node-pair seeds (link prediction) on heterogeneous graphs are not supported yet; "
                f"`seeds['{node_type}']` has shape {tuple(ids.shape)}"
            )
        out[node_type] = check_node_ids(ids, counts[node_type], f"seeds['{node_type}']", where).to(torch.int64)
    empty = torch.empty(0, dtype=torch.int64)
    return {t: out.get(t, empty) for t in node_types}


def sample_hetero_subgraphs(sampler, minibatch: MiniBatch) -> MiniBatch:
    """Fill ``sampled_subgraphs``, ``input_nodes`` and ``layout`` of a typed batch."""
    graph = sampler.graph
    name = type(sampler).__name__
    node_types, edge_types = graph.node_types, graph.edge_types
    type_id = graph.node_type_to_id
    offsets = graph.node_type_offset.tolist()
    counts = graph.num_nodes_per_type
    ends = [parse_edge_type(t) for t in edge_types]  # (src, rel, dst) per edge type id
    nodes = check_typed_seeds(minibatch.seeds, graph, name)
    frontier_start = dict.fromkeys(node_types, 0)  # pyg layout: nodes[t][start:] are the previous layer's new nodes
    pyg = sampler.layout == "pyg"
    subgraphs: List[SampledSubgraph] = []
    for layer in reversed(range(len(sampler.fanouts))):
        fanouts = sampler.edge_type_fanouts[layer]
        sampled = [t for t in range(len(edge_types)) if fanouts[t] != 0]
        destinations = {t: nodes[ends[t][2]][frontier_start[ends[t][2]] if pyg else 0 :] for t in sampled}
        segment_nodes = torch.cat(
            [destinations[t] + offsets[type_id[ends[t][2]]] for t in sampled] or [torch.empty(0, dtype=torch.int64)]
        )
        sizes = [destinations[t].numel() for t in sampled]
        segment_types = torch.repeat_interleave(torch.tensor(sampled, dtype=torch.int64), torch.tensor(sizes, dtype=torch.int64))
        segment_fanouts = torch.tensor(fanouts, dtype=torch.int64)[segment_types]
        sample = sample_typed_layer(
            graph.indptr,
            graph.type_per_edge,
            len(edge_types),
            segment_nodes,
            segment_types,
            segment_fanouts,
            lambda bounds, segments, key_ids, fanout: sampler.sample_segments(
                bounds, segments, key_ids, fanout, layer, minibatch
            ),
        )
        edge_ids = graph.map_edge_ids(sample.edge_ids)
        # Per sampled edge type: its segments [s0, s1) and edges [e0, e1) in the sample.
        segment_cuts = torch.tensor([0, *sizes], dtype=torch.int64).cumsum(0)
        edge_cuts = sample.indptr[segment_cuts].tolist()
        segment_cuts = segment_cuts.tolist()
        sources_by_type: Dict[str, List[torch.Tensor]] = {t: [] for t in node_types}
        for j, t in enumerate(sampled):
            sources_by_type[ends[t][0]].append(sample.indices[edge_cuts[j] : edge_cuts[j + 1]] - offsets[type_id[ends[t][0]]])
        new_nodes, local_sources = {}, {}
        for node_type in node_types:
            pieces = sources_by_type[node_type]
            everything = torch.cat(pieces) if pieces else torch.empty(0, dtype=torch.int64)
            new_nodes[node_type], local = unique_and_compact(nodes[node_type], everything, max(counts[node_type], 1))
            local_sources[node_type] = list(local.split([p.numel() for p in pieces]))
        csc, original_edge_ids, edge_weights = {}, {}, {}
        for j, t in enumerate(sampled):
            e0, e1 = edge_cuts[j], edge_cuts[j + 1]
            indptr = sample.indptr[segment_cuts[j] : segment_cuts[j + 1] + 1] - e0
            skipped = nodes[ends[t][2]].numel() - sizes[j]
            if skipped:
                indptr = torch.cat([indptr.new_zeros(skipped), indptr])
            csc[edge_types[t]] = CSCFormat(indptr, local_sources[ends[t][0]].pop(0))
            original_edge_ids[edge_types[t]] = edge_ids[e0:e1]
            if sample.edge_weights is not None:
                edge_weights[edge_types[t]] = sample.edge_weights[e0:e1]
        for t in range(len(edge_types)):  # edge types this layer does not sample: no edges
            if edge_types[t] not in csc:
                csc[edge_types[t]] = CSCFormat(
                    torch.zeros(nodes[ends[t][2]].numel() + 1, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
                )
                original_edge_ids[edge_types[t]] = torch.empty(0, dtype=torch.int64)
                if sample.edge_weights is not None:
                    edge_weights[edge_types[t]] = torch.empty(0, dtype=torch.float32)
        subgraphs.append(
            SampledSubgraph(
                sampled_csc={t: csc[t] for t in edge_types},
                original_row_node_ids=new_nodes,
                original_column_node_ids=nodes,
                original_edge_ids={t: original_edge_ids[t] for t in edge_types},
                edge_weights={t: edge_weights[t] for t in edge_types} if sample.edge_weights is not None else None,
            )
        )
        frontier_start = {t: nodes[t].numel() for t in node_types}
        nodes = new_nodes
    subgraphs.reverse()
    return replace(minibatch, sampled_subgraphs=subgraphs, input_nodes=nodes, layout=sampler.layout)
