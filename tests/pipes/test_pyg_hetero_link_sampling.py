"""PyG's heterogeneous LinkNeighborLoader tests (``test/loader/test_link_neighbor_loader.py``:
``test_hetero_link_neighbor_loader_basic``, ``_loop``, ``_no_edges``,
``test_hetero_link_neighbor_loader_triplet``, and ``test_link_neighbor_loader_edge_label``
on a typed graph), their sampling properties checked on graphpipe's typed link
MiniBatches (the ``HeteroData`` layout of ``to_pyg()`` is tested with the batch types).

Upstream's data is built the same way (``get_random_edge_index``: uniform endpoints,
repeats allowed) and its assertions are kept where they are about what was sampled:
positive seed edges are among the batch's sampled edges of their type (all in-edges are
sampled), negatives are labelled after the positives, the seeds' local ids map back to
the input edges, node ids stay within their type. Not ported: ``subgraph_type``
(graphpipe samples directed in-edges), temporal and ``disjoint`` variants, custom stores.
"""

import math

import pytest
import torch

import graphpipe as gp

TO = {("paper", "paper"): "paper:to:paper", ("paper", "author"): "paper:to:author", ("author", "paper"): "author:to:paper"}


def random_edge_index(num_src, num_dst, num_edges, gen):
    return torch.stack([torch.randint(num_src, (num_edges,), generator=gen), torch.randint(num_dst, (num_edges,), generator=gen)])


def paper_author_graph(seed=0):
    """Upstream's ``HeteroData``: 100 papers, 200 authors, paper->paper (500), paper->author
    (1000) and author->paper (1000) edges."""
    gen = torch.Generator().manual_seed(seed)
    edges = {
        TO["paper", "paper"]: random_edge_index(100, 100, 500, gen),
        TO["paper", "author"]: random_edge_index(100, 200, 1000, gen),
        TO["author", "paper"]: random_edge_index(200, 100, 1000, gen),
    }
    return gp.CSCGraph.from_hetero_edges(edges, {"paper": 100, "author": 200}), edges


def sampled_pairs(mb, etype):
    """The (source, destination) type-local pairs of every edge of type ``etype`` in the batch."""
    src_type, _, dst_type = etype.split(":")
    pairs = set()
    for sg in mb.sampled_subgraphs:
        csc = sg.sampled_csc[etype]
        columns = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
        src = sg.original_row_node_ids[src_type][csc.indices]
        dst = sg.original_column_node_ids[dst_type][columns]
        pairs |= set(zip(src.tolist(), dst.tolist()))
    return pairs


def loader(graph, etype, pairs, batch_size, ratio=None, labels=None, shuffle=True):
    """The epoch's batches of ``pairs`` ``[2, N]`` (asserted to be ``ceil(N / batch_size)``,
    so that the callers' loops run)."""
    fields = (pairs.t(),) if labels is None else (pairs.t(), labels)
    names = ("seeds",) if labels is None else ("seeds", "labels")
    pipe = gp.ItemSampler(gp.HeteroItemSet({etype: gp.ItemSet(fields, names=names)}), batch_size, shuffle=shuffle, seed=0)
    if ratio:
        pipe = pipe.sample_uniform_negative(graph, ratio, seed=1)
    batches = list(pipe.sample_neighbor(graph, [-1, -1], seed=2))
    assert len(batches) == math.ceil(pairs.size(1) / batch_size)
    return batches


@pytest.mark.parametrize("neg_sampling_ratio", [None, 1])
def test_hetero_link_neighbor_loader_basic(neg_sampling_ratio):
    graph, edges = paper_author_graph()
    etype = TO["paper", "author"]
    pipe = loader(graph, etype, edges[etype], 20, neg_sampling_ratio)
    for mb in pipe:
        assert set(mb.seeds) == {etype}
        seeds, labels = mb.seeds[etype], mb.labels[etype] if mb.labels is not None else None
        if neg_sampling_ratio is None:
            # Positive samples are present in the sampled graph:
            assert set(map(tuple, seeds.tolist())) <= sampled_pairs(mb, etype)
        else:
            assert seeds.shape == (40, 2)
            assert bool(labels[:20].all()) and not bool(labels[20:].any())


def test_hetero_link_neighbor_loader_loop():
    graph, edges = paper_author_graph()
    etype = TO["paper", "paper"]
    for mb in loader(graph, etype, edges[etype], 20):
        papers = mb.input_nodes["paper"]
        assert papers.numel() <= 100 and int(papers.min()) >= 0 and int(papers.max()) < 100
        assert set(map(tuple, mb.seeds[etype].tolist())) <= sampled_pairs(mb, etype)


def test_hetero_link_neighbor_loader_no_edges():
    graph = gp.CSCGraph.from_hetero_edges({TO["paper", "paper"]: torch.empty(2, 0, dtype=torch.int64)}, {"paper": 100})
    pairs = random_edge_index(100, 100, 100, torch.Generator().manual_seed(1))
    for mb in loader(graph, TO["paper", "paper"], pairs, 20):
        assert mb.item_ids[TO["paper", "paper"]].numel() == 20
        assert mb.seeds[TO["paper", "paper"]].shape == (20, 2)
        assert mb.input_nodes["paper"].numel() == mb.seeds[TO["paper", "paper"]].unique().numel()


@pytest.mark.parametrize("amount", [1, 2])
def test_hetero_link_neighbor_loader_triplet(amount):
    """The seeds' local ids (PyG's ``src_index`` / ``dst_pos_index``: the positives,
    ``dst_neg_index``: the negatives) map back to the input edges and the batch's nodes."""
    graph, edges = paper_author_graph()
    etype = TO["paper", "paper"]
    label_pairs = random_edge_index(100, 100, 500, torch.Generator().manual_seed(2))
    pipe = loader(graph, etype, label_pairs, 20, amount)
    for mb in pipe:
        nodes = mb.sampled_subgraphs[-1].original_column_node_ids["paper"]
        local, input_id = mb.compacted_seeds[etype], mb.item_ids[etype]
        positives = local[:20]
        assert torch.equal(nodes[positives[:, 0]], label_pairs[0, input_id])  # src_index
        assert torch.equal(nodes[positives[:, 1]], label_pairs[1, input_id])  # dst_pos_index
        negatives = local[20:, 1].view(20, amount)  # dst_neg_index
        assert int(negatives.min()) >= 0 and int(negatives.max()) < mb.input_nodes["paper"].numel()
        assert torch.equal(local[20:, 0].view(20, amount), positives[:, :1].expand(20, amount))  # their source


def test_link_neighbor_loader_edge_label():
    graph, edges = paper_author_graph()
    etype = TO["paper", "paper"]
    for mb in loader(graph, etype, edges[etype], 10, ratio=1):
        labels = mb.labels[etype]
        assert labels.dtype == torch.float32  # GraphBolt 2.2+'s and PyG's
        assert bool(labels[:10].all()) and not bool(labels[10:].any())
    user_labels = torch.ones(500, dtype=torch.long)
    for mb in loader(graph, etype, edges[etype], 10, ratio=1, labels=user_labels):
        labels = mb.labels[etype]
        assert labels.dtype == torch.long
        assert bool((labels[:10] == 1).all()) and bool((labels[10:] == 0).all())
