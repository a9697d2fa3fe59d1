"""The layer loop of :class:`~graphpipe.SubgraphSampler` on typed (heterogeneous) graphs.

Every id here is type-local (a node's position among the nodes of its type), as in
GraphBolt's heterogeneous MiniBatches; the graph's kernels see global ids
(``node_type_offset[type] + local``). Per layer:

1. every edge type ``t = src:rel:dst`` with a non-zero fanout gets one segment per
   destination of type ``dst`` (all of them in block layout, the ones the previous
   layer added in pyg layout), ordered by edge type, then destination;
2. one call of the sampler's :meth:`sample_segments` samples them all
   (:func:`~graphpipe.ops.typed_sampling.sample_segments`);
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
from typing import Dict, List, Optional

import torch

from graphpipe.graph.checks import check_typed_seeds
from graphpipe.graph.edge_types import parse_edge_type
from graphpipe.batch.minibatch import MiniBatch
from graphpipe.graph.sampled_subgraph import CSCFormat, SampledSubgraph
from graphpipe.ops import unique_and_compact
from graphpipe.ops.typed_sampling import sample_segments, typed_segments_of_nodes
from graphpipe._internal.checks import check_node_ids

__all__ = ["sample_hetero_layer", "sample_hetero_subgraphs"]


def sample_hetero_subgraphs(sampler, minibatch: MiniBatch) -> MiniBatch:
    """Fill ``sampled_subgraphs``, ``input_nodes`` and ``layout`` of a typed batch."""
    graph = sampler.graph
    nodes = check_typed_seeds(minibatch.seeds, graph, type(sampler).__name__)
    frontier_start = dict.fromkeys(graph.node_types, 0)
    subgraphs: List[SampledSubgraph] = []
    for layer in reversed(range(len(sampler.fanouts))):
        subgraph = sample_hetero_layer(sampler, nodes, layer, minibatch, frontier_start if sampler.layout == "pyg" else None)
        subgraphs.append(subgraph)
        frontier_start = {t: ids.numel() for t, ids in nodes.items()}
        nodes = subgraph.original_row_node_ids
    subgraphs.reverse()
    return replace(minibatch, sampled_subgraphs=subgraphs, input_nodes=nodes, layout=sampler.layout)


def sample_hetero_layer(
    sampler, nodes: Dict[str, torch.Tensor], layer: int, minibatch: MiniBatch, frontier_start: Optional[Dict[str, int]] = None
) -> SampledSubgraph:
    """Sample GNN layer ``layer`` of a typed graph and compact it per node type.

    Args:
        sampler: the sampling stage (its ``graph``, ``edge_type_fanouts`` and
            ``sample_segments``).
        nodes: node type -> ``[n]`` int64 type-local destination ids (every node type).
        layer: the layer's index (its fanouts and random key).
        minibatch: the batch (its ``batch_index`` keys the variates).
        frontier_start: pyg layout: node type -> how many of its destinations the layers
            before sampled already (they get no in-edges here); None: every destination
            samples (block layout).
    """
    graph = sampler.graph
    node_types, edge_types = graph.node_types, graph.edge_types
    type_id = graph.node_type_to_id
    offsets = graph.node_type_offset.tolist()
    counts = graph.num_nodes_per_type
    ends = [parse_edge_type(t) for t in edge_types]  # (src, rel, dst) per edge type id
    fanouts = sampler.edge_type_fanouts[layer]
    sampled = [t for t in range(len(edge_types)) if fanouts[t] != 0]
    skipped = {t: 0 if frontier_start is None else frontier_start[ends[t][2]] for t in sampled}
    # The destinations of each node type, with the sampled edge types that end there.
    groups = {}
    for t in sampled:
        dst_type = ends[t][2]
        if dst_type not in groups:
            groups[dst_type] = (nodes[dst_type][skipped[t] :] + offsets[type_id[dst_type]], [])
        groups[dst_type][1].append(t)
    bounds, key_ids = typed_segments_of_nodes(graph.indptr, graph.type_per_edge, list(groups.values()), len(edge_types))
    sizes = [groups[ends[t][2]][0].numel() for t in sampled]
    segment_fanouts = torch.repeat_interleave(
        torch.tensor([fanouts[t] for t in sampled], dtype=torch.int64), torch.tensor(sizes, dtype=torch.int64)
    )
    sample = sample_segments(
        bounds,
        key_ids,
        segment_fanouts,
        lambda bounds, segments, key_ids, fanout: sampler.sample_segments(bounds, segments, key_ids, fanout, layer, minibatch),
    )
    edge_ids = graph.map_edge_ids(sample.edge_ids)
    # Per sampled edge type: its segments [s0, s1) and edges [e0, e1) of the sample.
    segment_cuts = torch.tensor([0, *sizes], dtype=torch.int64).cumsum(0)
    edge_cuts = sample.indptr[segment_cuts].tolist()
    segment_cuts = segment_cuts.tolist()
    # Each node type's sources: the edges of the edge types leaving it. Edge type ids
    # sorted by name group them by source type, so these are usually one slice.
    ranges: Dict[str, List[List[int]]] = {t: [] for t in node_types}
    for j, t in enumerate(sampled):
        runs = ranges[ends[t][0]]
        if runs and runs[-1][1] == edge_cuts[j]:
            runs[-1][1] = edge_cuts[j + 1]
        else:
            runs.append([edge_cuts[j], edge_cuts[j + 1]])
    new_nodes, local_sources = {}, {}
    for node_type in node_types:
        pieces = [sample.indices[e0:e1] for e0, e1 in ranges[node_type]]
        sources = torch.cat(pieces) if len(pieces) > 1 else pieces[0] if pieces else torch.empty(0, dtype=torch.int64)
        if offsets[type_id[node_type]]:
            sources = sources - offsets[type_id[node_type]]
        new_nodes[node_type], local_sources[node_type] = unique_and_compact(
            nodes[node_type], sources, max(counts[node_type], 1)
        )
    taken = dict.fromkeys(node_types, 0)  # sources of each type handed out so far
    csc, original_edge_ids, edge_weights = {}, {}, {}
    for t in range(len(edge_types)):
        name, (src_type, _, dst_type) = edge_types[t], ends[t]
        if t not in skipped:  # not sampled in this layer: no edges
            indptr, local = torch.zeros(nodes[dst_type].numel() + 1, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
            ids = torch.empty(0, dtype=torch.int64)
            weights = None if sample.edge_weights is None else torch.empty(0, dtype=torch.float32)
        else:
            j = sampled.index(t)
            e0, e1 = edge_cuts[j], edge_cuts[j + 1]
            indptr = sample.indptr[segment_cuts[j] : segment_cuts[j + 1] + 1] - e0
            if skipped[t]:
                indptr = torch.cat([indptr.new_zeros(skipped[t]), indptr])
            local = local_sources[src_type][taken[src_type] : taken[src_type] + e1 - e0]
            taken[src_type] += e1 - e0
            ids = edge_ids[e0:e1]
            weights = None if sample.edge_weights is None else sample.edge_weights[e0:e1]
        csc[name] = CSCFormat(indptr, local)
        original_edge_ids[name] = ids
        edge_weights[name] = weights
    return SampledSubgraph(
        sampled_csc=csc,
        original_row_node_ids=new_nodes,
        original_column_node_ids=nodes,
        original_edge_ids=original_edge_ids,
        edge_weights=edge_weights if sample.edge_weights is not None else None,
    )
