"""A plain-Python model of graphpipe's typed link MiniBatch (GraphBolt's heterogeneous
link-prediction layout), for the ``to_pyg()`` tests of typed node pairs.

``typed_link_batch`` lays a batch out as the contract says: ``seeds``, ``labels``,
``indexes``, ``item_ids`` and ``compacted_seeds`` by edge type; the last layer's
destinations of each node type are its distinct endpoints over every seed edge type,
ascending, and ``compacted_seeds`` index them (column 0 the source type's, column 1 the
destination type's); every layer's sources per node type are its destinations, then its
new nodes ascending. Sampling is deterministic: a destination takes its first ``fanout``
in-edges of each edge type, in edge-id order (-1: all), in every layer (``"block"``) or
only in the layer of the hop where it is first reached (``"pyg"``), so both layouts give
the same NeighborLoader subgraph.
"""

from typing import Dict, List, Optional

import torch

import graphpipe as gp


def typed_link_batch(
    edges: Dict[str, torch.Tensor],
    num_nodes: Dict[str, int],
    seeds: Dict[str, torch.Tensor],
    fanouts: List[int],
    layout: str,
    labels: Optional[Dict[str, torch.Tensor]] = None,
    indexes: Optional[Dict[str, torch.Tensor]] = None,
    item_ids: Optional[Dict[str, torch.Tensor]] = None,
    node_tables: Optional[Dict[str, torch.Tensor]] = None,
    edge_tables: Optional[Dict[str, torch.Tensor]] = None,
) -> gp.MiniBatch:
    """A typed link MiniBatch of ``seeds`` ``{etype: [N, 2]}`` (type-local pairs) on the
    graph ``edges`` ``{etype: [2, m]}``; ``fanouts`` input layer first (graphpipe's
    order). ``node_tables[t]`` / ``edge_tables[etype]`` give the features ``(t, "x")``
    and ``(etype, "edge_attr")``, fetched for ``input_nodes`` and the sampled edges."""
    in_edges = {}  # (etype, destination) -> [(source, edge id)], edge-id order
    for etype, (src, dst) in edges.items():
        for e, (u, v) in enumerate(zip(src.tolist(), dst.tolist())):
            in_edges.setdefault((etype, v), []).append((u, e))
    ends = {etype: etype.split(":") for etype in edges}
    endpoints = {t: set() for t in num_nodes}
    for etype, pairs in seeds.items():
        src_type, _, dst_type = etype.split(":")
        endpoints[src_type].update(pairs[:, 0].tolist())
        endpoints[dst_type].update(pairs[:, 1].tolist())
    nodes = {t: sorted(ids) for t, ids in endpoints.items()}
    compacted = {}
    for etype, pairs in seeds.items():
        src_type, _, dst_type = etype.split(":")
        local = [[nodes[src_type].index(u), nodes[dst_type].index(v)] for u, v in pairs.tolist()]
        compacted[etype] = torch.tensor(local, dtype=torch.int64).view(-1, 2)
    layers, sampled_from = [], dict.fromkeys(nodes, 0)  # pyg: nodes[t][sampled_from[t]:] sample
    for fanout in reversed(fanouts):
        picked = {}
        for etype, (src_type, _, dst_type) in ends.items():
            start = 0 if layout == "block" else sampled_from[dst_type]
            picked[etype] = [
                in_edges.get((etype, v), [])[: None if fanout == -1 else fanout] if j >= start else []
                for j, v in enumerate(nodes[dst_type])
            ]
        reached = {t: set() for t in nodes}
        for etype, (src_type, _, _) in ends.items():
            reached[src_type].update(u for per_dst in picked[etype] for u, _ in per_dst)
        rows = {t: ids + sorted(reached[t] - set(ids)) for t, ids in nodes.items()}
        layers.append(_layer(picked, ends, nodes, rows))
        sampled_from = {t: len(ids) for t, ids in nodes.items()}
        nodes = rows
    layers.reverse()
    input_nodes = {t: torch.tensor(ids, dtype=torch.int64) for t, ids in nodes.items()}
    mb = gp.MiniBatch(
        seeds=seeds, labels=labels, sampled_subgraphs=layers, input_nodes=input_nodes, layout=layout,
        indexes=indexes, compacted_seeds=compacted, item_ids=item_ids,
    )
    if node_tables:
        mb.node_features = {(t, "x"): table[input_nodes[t]] for t, table in node_tables.items()}
    if edge_tables:
        mb.edge_features = [
            {(etype, "edge_attr"): table[sg.original_edge_ids[etype]] for etype, table in edge_tables.items()}
            for sg in layers
        ]
    return mb


def _layer(picked, ends, nodes, rows) -> gp.SampledSubgraph:
    """The SampledSubgraph of the in-edges ``picked[etype][j]`` of destination ``j``."""
    position = {t: {v: i for i, v in enumerate(ids)} for t, ids in rows.items()}
    csc, edge_ids = {}, {}
    for etype, (src_type, _, _) in ends.items():
        degrees = [len(per_dst) for per_dst in picked[etype]]
        indptr = torch.tensor([0] + degrees, dtype=torch.int64).cumsum(0)
        sources = [position[src_type][u] for per_dst in picked[etype] for u, _ in per_dst]
        csc[etype] = gp.CSCFormat(indptr, torch.tensor(sources, dtype=torch.int64))
        edge_ids[etype] = torch.tensor([e for per_dst in picked[etype] for _, e in per_dst], dtype=torch.int64)
    as_tensors = lambda ids: {t: torch.tensor(v, dtype=torch.int64) for t, v in ids.items()}  # noqa: E731
    return gp.SampledSubgraph(csc, as_tensors(rows), as_tensors(nodes), edge_ids)
