"""GraphBolt's hyperlink items (``[N, k]`` seeds, ``k > 2``), run against graphpipe.

Ported from ``dmlc/dgl`` ``tests/python/pytorch/graphbolt/test_subgraph_sampler.py``
(``test_SubgraphSampler_HyperLink``, ``test_SubgraphSampler_unique_csc_format_Homo_HyperLink_cpu``;
``test_ItemSet_hyperlink`` is in ``tests/pipes/test_item_sampler.py``). The layers are
sampled from the hyperlinks' distinct nodes and ``compacted_seeds`` holds the items in
those local ids. Where GraphBolt numbers newly reached sources by first appearance,
graphpipe numbers them ascending: the sampled edges are compared as sets of global
``(source, destination)`` ids.
"""

import pytest
import torch

import graphpipe as gp

SAMPLERS = {False: gp.NeighborSampler, True: gp.LayerNeighborSampler}


def _edges(subgraph):
    src, dst = subgraph.edge_index()
    return sorted(zip(subgraph.original_row_node_ids[src].tolist(), subgraph.original_column_node_ids[dst].tolist()))


@pytest.mark.parametrize("labor", [False, True])
def test_subgraph_sampler_hyperlink(labor):
    g = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, 20, (2, 60), generator=g)
    graph = gp.CSCGraph.from_coo(torch.cat([src, dst]), torch.cat([dst, src]), num_nodes=20)
    items = gp.ItemSet(torch.arange(20).reshape(-1, 5), names="seeds")
    pipe = SAMPLERS[labor](gp.ItemSampler(items, batch_size=2), graph, [2, 2])
    batches = list(pipe)
    assert len(pipe) == len(batches) == 2
    for i, data in enumerate(batches):
        assert torch.equal(data.compacted_seeds, torch.tensor([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]))
        assert torch.equal(data.sampled_subgraphs[-1].original_column_node_ids, torch.arange(10 * i, 10 * i + 10))
        assert torch.equal(data.input_nodes[:10], torch.arange(10 * i, 10 * i + 10))


@pytest.mark.parametrize("labor", [False, True])
def test_subgraph_sampler_unique_csc_format_homo_hyperlink(labor):
    graph = gp.CSCGraph.from_coo(torch.tensor([5, 0, 6, 7, 2, 2, 4]), torch.tensor([0, 1, 2, 2, 3, 4, 4]), num_nodes=8)
    items = gp.ItemSet(torch.LongTensor([[0, 3, 3], [4, 4, 4]]), names="seeds")
    data = next(iter(SAMPLERS[labor](gp.ItemSampler(items, batch_size=4), graph, [2, 2])))
    assert torch.equal(data.compacted_seeds, torch.tensor([[0, 1, 1], [2, 2, 2]]))
    # GraphBolt's expected layers (every fanout covers every in-degree: no randomness),
    # read as global edges: original_row_node_ids [0, 3, 4, 5, 2(, 6, 7)].
    seeds = [[0, 3, 4, 5, 2], [0, 3, 4]]
    edges = [
        sorted([(5, 0), (2, 3), (2, 4), (4, 4), (6, 2), (7, 2)]),
        sorted([(5, 0), (2, 3), (2, 4), (4, 4)]),
    ]
    for step, subgraph in enumerate(data.sampled_subgraphs):
        columns = subgraph.original_column_node_ids.tolist()
        assert sorted(columns) == sorted(seeds[step]) and columns[:3] == [0, 3, 4]
        assert _edges(subgraph) == edges[step]
    assert data.sampled_subgraphs[0].original_row_node_ids.tolist() == [0, 3, 4, 2, 5, 6, 7]  # new ones ascending


def test_hyperlinks_where_only_pairs_make_sense_are_refused():
    graph = gp.CSCGraph.from_coo(torch.tensor([1, 2, 0]), torch.tensor([0, 1, 2]), num_nodes=3)
    items = gp.ItemSet(torch.tensor([[0, 1, 2]]), names="seeds")
    with pytest.raises(ValueError, match=r"`exclude_seed_edges=True` needs node pairs as seeds \(\[N, 2\]\).*ItemSet of hyperlink seeds"):
        gp.ItemSampler(items, 1).sample_neighbor(graph, [1], exclude_seed_edges=True)  # refused when built
    with pytest.raises(ValueError, match=r"`exclude_seed_edges=True` needs node pairs as seeds \(\[N, 2\]\).*\(1, 3\)"):
        gp.NeighborSampler(None, graph, [1], exclude_seed_edges=True).sample_subgraphs(gp.MiniBatch(seeds=items.items[0]))
    with pytest.raises(ValueError, match=r"`seeds` must be node pairs of shape \[N, 2\]"):
        next(iter(gp.ItemSampler(items, 1).sample_uniform_negative(graph, 1)))
    pytest.importorskip("torch_geometric")
    with pytest.raises(ValueError, match=r"to_pyg\(\): the seeds are hyperlinks of 3 nodes each.*edge_label_index\.t\(\)"):
        next(iter(gp.ItemSampler(items, 1).sample_neighbor(graph, [1]))).to_pyg()
