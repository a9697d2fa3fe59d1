"""MiniBatches as DGL message-flow graphs (blocks), as GraphBolt's ``MiniBatch.blocks``."""

from __future__ import annotations

import torch

from graphpipe.graph.edge_types import parse_edge_type

__all__ = ["blocks"]


def blocks(minibatch) -> list:
    """The sampled layers as DGL message-flow graphs (``dgl.create_block``), input first.

    Same as GraphBolt's ``MiniBatch.blocks``: block ``i`` feeds GNN layer ``i``, its
    ``srcdata[dgl.NID]``/``dstdata[dgl.NID]`` hold node ids, ``edata[dgl.EID]`` the
    graph's edge ids and, when the sampler set them, ``edata["edge_weights"]`` the
    estimator weights. Needs ``dgl`` (imported lazily) and a batch sampled with
    ``layout="block"``.

    Typed batches (node seeds or node pairs) give heterograph blocks, as GraphBolt's:
    canonical edge types ``(src, rel, dst)``, ``srcnodes[ntype].data[dgl.NID]`` /
    ``dstnodes[ntype].data[dgl.NID]`` type-local node ids and
    ``edges[etype].data[dgl.EID]`` type-local edge ids. An untyped layer is the
    one-type case (:meth:`SampledSubgraph.as_typed`): node type ``"_N"`` and edge type
    ``("_N", "_E", "_N")``, the types DGL gives a homogeneous block.
    """
    if minibatch.layout != "block":
        raise ValueError(
            f"MiniBatch.blocks: the batch was sampled with layout={minibatch.layout!r} (PyG's NeighborLoader: a "
            f"node's in-edges are sampled only at the hop where it is first reached), so its layers leave "
            f"earlier destinations without in-edges and a block-based model would compute wrong outputs; "
            f"sample with layout='block' (the default) for blocks, or use to_pyg()"
        )
    try:
        import dgl
    except ImportError as err:
        raise ImportError("MiniBatch.blocks needs DGL: pip install dgl") from err
    if not minibatch.sampled_subgraphs:
        raise ValueError("MiniBatch.blocks: the batch has no sampled_subgraphs; add a sampler stage")
    out = []
    for sg in minibatch.sampled_subgraphs:
        sg = sg.as_typed()
        canonical = {etype: parse_edge_type(etype) for etype in sg.sampled_csc}
        graph_data = {
            canonical[etype]: ("csc", (csc.indptr.to(torch.int64), csc.indices.to(torch.int64), torch.arange(csc.indices.numel(), device=csc.indices.device)))
            for etype, csc in sg.sampled_csc.items()
        }
        block = dgl.create_block(graph_data, num_src_nodes=sg.num_src_nodes, num_dst_nodes=sg.num_dst_nodes)
        for node_type, ids in sg.original_row_node_ids.items():
            block.srcnodes[node_type].data[dgl.NID] = ids
        for node_type, ids in sg.original_column_node_ids.items():
            block.dstnodes[node_type].data[dgl.NID] = ids
        for etype, edge_type in canonical.items():
            ids = (sg.original_edge_ids or {}).get(etype)
            if ids is not None:  # None in a batch built by hand
                block.edges[edge_type].data[dgl.EID] = ids
            if sg.edge_weights is not None:
                block.edges[edge_type].data["edge_weights"] = sg.edge_weights[etype]
        out.append(block)
    return out
