"""Sampled link batches whose layers hold seed edges and their reverses, for the tests of
``gp.exclude_seed_edges`` (``tests/batch``) and of its equality with GraphBolt's
(``tests/interop``): an untyped graph with every edge's reverse, and a typed one whose
``item:liked-by:user`` edges are the ``user:like:item`` edges flipped (``REVERSE``)."""

import torch

import graphpipe as gp

NUM_NODES = {"user": 20, "item": 30}
REVERSE = {"user:like:item": "item:liked-by:user"}


def graph_and_items(typed: bool):
    """``(graph, items)``: a graph with parallel edges and reverses, and an item set of
    16 of its edges as ``[N, 2]`` seeds (typed: of ``user:like:item``)."""
    gen = torch.Generator().manual_seed(7)
    if not typed:
        edges = torch.randint(0, 30, (2, 150), generator=gen)
        edges = torch.cat([edges, edges[:, :20], edges.flip(0)], dim=1)  # parallel edges, then every reverse
        return gp.CSCGraph.from_edge_index(edges, num_nodes=30), gp.ItemSet(edges.t()[:16].clone(), names="seeds")
    like = torch.stack([torch.randint(0, 20, (120,), generator=gen), torch.randint(0, 30, (120,), generator=gen)])
    edges = {"user:like:item": like, "item:liked-by:user": like.flip(0), "item:similar:item": torch.randint(0, 30, (2, 90), generator=gen)}
    items = gp.HeteroItemSet({"user:like:item": gp.ItemSet(like.t()[:16].clone(), names="seeds")})
    return gp.CSCGraph.from_hetero_edges(edges, NUM_NODES), items


def link_batches(typed: bool, layout: str = "block", negatives: int = 2, sampler: str = "sample_neighbor"):
    """The sampled batches (4 pairs each, ``negatives`` per positive) of
    :func:`graph_and_items`, with fanouts ``[5, 5]``."""
    graph, items = graph_and_items(typed)
    pipe = gp.ItemSampler(items, 4, shuffle=True, seed=1)
    if negatives:
        pipe = pipe.sample_uniform_negative(graph, negatives, seed=2)
    return list(getattr(pipe, sampler)(graph, [5, 5], seed=3, layout=layout))


def layer_edges(layer) -> dict:
    """``{edge type: [(source, destination, edge id)]}`` of a layer in global ids, CSC
    order (untyped: the one type ``"_N:_E:_N"``)."""
    layer = layer.as_typed()
    found = {}
    for etype, (src, dst) in layer.edge_index().items():
        src_type, _, dst_type = etype.split(":")
        rows, columns = layer.original_row_node_ids[src_type], layer.original_column_node_ids[dst_type]
        found[etype] = list(zip(rows[src].tolist(), columns[dst].tolist(), layer.original_edge_ids[etype].tolist()))
    return found
