"""FeatureFetcher on typed (heterogeneous) batches: dict keys per type, GraphBolt's layout."""

import gc

import pytest
import torch

from graphpipe import CSCGraph, FeatureStore, ItemSampler, ItemSet, MiniBatch
from graphpipe.batch.item_set import HeteroItemSet
from graphpipe.pipes import FeatureFetcher

WRITES, CITES = "author:writes:paper", "paper:cites:paper"
NUM_NODES = {"author": 20, "paper": 30}


def _graph_and_store():
    g = torch.Generator().manual_seed(0)
    edges = {
        WRITES: torch.stack([torch.randint(0, 20, (50,), generator=g), torch.randint(0, 30, (50,), generator=g)]),
        CITES: torch.randint(0, 30, (2, 70), generator=g),
    }
    graph = CSCGraph.from_hetero_edges(edges, NUM_NODES)
    store = FeatureStore(
        {
            ("paper", "feat"): torch.randn(30, 4, generator=g),
            ("author", "feat"): torch.randn(20, 4, generator=g),
            ("paper", "year"): torch.randint(2000, 2020, (30,), generator=g),
        },
        # Each edge type's "eid" is its type-local edge id: the position in its input edge list.
        {((*WRITES.split(":"),), "eid"): torch.arange(50), (CITES, "eid"): torch.arange(70)},
    )
    return edges, graph, store


def _pipe(graph, fanouts=(3, 2), layout="block"):
    items = HeteroItemSet({"paper": ItemSet(30), "author": ItemSet(20)})
    return ItemSampler(items, batch_size=8, shuffle=True, seed=0).sample_neighbor(graph, list(fanouts), seed=1, layout=layout)


@pytest.mark.parametrize("layout", ["block", "pyg"])
def test_rows_align_with_typed_input_nodes_and_edge_ids(layout):
    edges, graph, store = _graph_and_store()
    pipe = _pipe(graph, layout=layout).fetch_feature(
        store,
        node_feature_keys={"paper": ["feat", "year"], "author": ["feat"]},
        edge_feature_keys={("author", "writes", "paper"): ["eid"], CITES: ["eid"]},
    )
    assert pipe.typed and pipe.node_feature_keys == {"paper": ["feat", "year"], "author": ["feat"]}
    assert pipe.edge_feature_keys == {WRITES: ["eid"], CITES: ["eid"]}  # tuple edge types as strings
    num_edges = {WRITES: 0, CITES: 0}
    for mb in pipe:
        assert set(mb.node_features) == {("paper", "feat"), ("paper", "year"), ("author", "feat")}
        for (ntype, name), rows in mb.node_features.items():
            assert torch.equal(rows, store["node", ntype, name].data[mb.input_nodes[ntype]])
        assert len(mb.edge_features) == 2
        for layer, subgraph in zip(mb.edge_features, mb.sampled_subgraphs):
            assert set(layer) == {(WRITES, "eid"), (CITES, "eid")}
            for etype in (WRITES, CITES):
                eids = layer[etype, "eid"]
                assert torch.equal(eids, subgraph.original_edge_ids[etype])
                # The type-local id names the sampled edge: its source in the input edge list is the sampled source.
                src_type = etype.split(":")[0]
                src = subgraph.original_row_node_ids[src_type][subgraph.sampled_csc[etype].indices]
                assert torch.equal(edges[etype][0][eids], src)
                num_edges[etype] += eids.numel()
    assert all(count > 0 for count in num_edges.values())


def test_types_without_nodes_or_edges_get_empty_rows_of_the_right_shape():
    _, graph, store = _graph_and_store()
    # Paper seeds, and author:writes:paper never sampled: no author nodes, no writes edges.
    pipe = ItemSampler(HeteroItemSet({"paper": ItemSet(30)}), batch_size=8).sample_neighbor(graph, [{WRITES: 0, CITES: 2}])
    fetcher = pipe.fetch_feature(
        store, node_feature_keys={"paper": ["feat"], "author": ["feat"]}, edge_feature_keys={WRITES: ["eid"], CITES: ["eid"]}
    )
    out = next(iter(fetcher))
    assert out.input_nodes["author"].numel() == 0 and out.input_nodes["paper"].numel() >= 8
    assert out.node_features["author", "feat"].shape == (0, 4)
    assert out.node_features["author", "feat"].dtype == torch.float32
    assert out.edge_features[0][WRITES, "eid"].shape == (0,)
    assert torch.equal(out.edge_features[0][CITES, "eid"], out.sampled_subgraphs[0].original_edge_ids[CITES])
    # Seeds-only batches hold only the types they have: the others are empty too.
    nodes_only = FeatureFetcher([], store, node_feature_keys={"paper": ["feat"], "author": ["feat"]})
    seeds_only = nodes_only.fetch(MiniBatch(seeds={"paper": torch.tensor([3, 1])}))
    assert torch.equal(seeds_only.node_features["paper", "feat"], store["node", "paper", "feat"].data[[3, 1]])
    assert seeds_only.node_features["author", "feat"].shape == (0, 4)


def test_construction_errors_name_the_argument_and_the_known_types():
    _, graph, store = _graph_and_store()
    pipe = _pipe(graph)
    with pytest.raises(ValueError, match=r"`node_feature_keys` names node type 'venue', which the graph of the "
                       r"upstream NeighborSampler lacks; known node types: \['author', 'paper'\]"):
        pipe.fetch_feature(store, node_feature_keys={"venue": ["feat"]})
    with pytest.raises(ValueError, match=r"`edge_feature_keys` names edge type 'paper:cited_by:paper'.*"
                       r"known edge types: \['author:writes:paper', 'paper:cites:paper'\]"):
        pipe.fetch_feature(store, edge_feature_keys={("paper", "cited_by", "paper"): ["eid"]})
    with pytest.raises(KeyError, match=r"features missing for a type: node type 'author' has no feature\(s\) "
                       r"\['year'\].*`node_feature_keys\['author'\]`.*its node features: \['feat'\]"):
        pipe.fetch_feature(store, node_feature_keys={"paper": ["year"], "author": ["year"]})
    with pytest.raises(TypeError, match=r"heterogeneous, so `node_feature_keys` / `edge_feature_keys` must be "
                       r"dicts of type -> names, e\.g\. node_feature_keys=\{'author': \['feat'\]\}"):
        pipe.fetch_feature(store, node_feature_keys=["feat"])  # the typed store has no plain "feat": same advice
    with pytest.raises(TypeError, match=r"`edge_feature_keys` must be a dict of edge type -> names"):
        pipe.fetch_feature(store, node_feature_keys={"paper": ["feat"]}, edge_feature_keys=["eid"])
    with pytest.raises(TypeError, match=r"`node_feature_keys\['paper'\]` must be a list of names, got 'feat'"):
        pipe.fetch_feature(store, node_feature_keys={"paper": "feat"})
    homogeneous = ItemSampler(ItemSet(10), batch_size=4).sample_neighbor(CSCGraph.from_coo([0, 1], [1, 2], num_nodes=10), [2])
    with pytest.raises(TypeError, match=r"graph of the upstream NeighborSampler is homogeneous, so "
                       r"`node_feature_keys` must be a list of names"):
        homogeneous.fetch_feature(store, node_feature_keys={"paper": ["feat"]})


def test_row_counts_per_type_are_checked_against_the_graph():
    _, graph, store = _graph_and_store()
    short = FeatureStore({("paper", "feat"): torch.zeros(20, 4)}, {(WRITES, "w"): torch.zeros(40)})
    with pytest.raises(ValueError, match=r"node feature 'feat' of type 'paper' has 20 rows, but the graph of the "
                       r"upstream NeighborSampler has 30 nodes of type 'paper'"):
        _pipe(graph).fetch_feature(short, node_feature_keys={"paper": ["feat"]})
    # Counted per edge type: 40 rows cover every edge of a type with fewer, not author:writes:paper (50).
    with pytest.raises(ValueError, match=r"edge feature 'w' of type 'author:writes:paper' has 40 rows, but the "
                       r"graph of the upstream NeighborSampler has 50 edges of type 'author:writes:paper'"):
        _pipe(graph).fetch_feature(short, edge_feature_keys={WRITES: ["w"]})
    longer = FeatureStore({("paper", "feat"): torch.zeros(35, 4)}, {(WRITES, "w"): torch.zeros(70)})
    _pipe(graph).fetch_feature(longer, node_feature_keys={"paper": ["feat"]}, edge_feature_keys={WRITES: ["w"]})


def test_batch_kind_must_match_the_keys_and_ids_are_checked():
    _, _, store = _graph_and_store()
    typed = FeatureFetcher([], store, node_feature_keys={"paper": ["feat"]})
    with pytest.raises(TypeError, match=r"the keys are per type \(dicts\), so `seeds` must be a dict of type -> ids"):
        typed.fetch(MiniBatch(seeds=torch.tensor([1])))
    with pytest.raises(ValueError, match=r"node feature 'feat' of type 'paper' \(30 rows\): `seeds\['paper'\]` "
                       r"holds node id 30"):
        typed.fetch(MiniBatch(seeds={"paper": torch.tensor([1, 30])}))
    homogeneous = FeatureFetcher([], FeatureStore({"feat": torch.zeros(3, 1)}), node_feature_keys=["feat"])
    with pytest.raises(TypeError, match=r"`seeds` is a dict of type -> ids \(a heterogeneous batch\), so the keys "
                       r"must be dicts"):
        homogeneous.fetch(MiniBatch(seeds={"paper": torch.tensor([1])}))


def test_output_blocks_are_kept_per_kind_type_and_name():
    _, _, store = _graph_and_store()
    fetcher = FeatureFetcher([], store, node_feature_keys={"paper": ["feat"], "author": ["feat"]})
    batch = MiniBatch(seeds={"paper": torch.tensor([1, 2, 3]), "author": torch.tensor([4, 5, 6])})
    out = fetcher.fetch(batch)
    # Same name and shape in two types: two blocks, neither overwrites the other.
    paper, author = out.node_features["paper", "feat"], out.node_features["author", "feat"]
    assert paper.data_ptr() != author.data_ptr()
    assert set(fetcher._blocks._blocks) == {("node", "paper", "feat"), ("node", "author", "feat")}
    pointers = (paper.data_ptr(), author.data_ptr())
    del out, paper, author
    gc.collect()
    again = fetcher.fetch(batch)  # the blocks are free again: reused, rows rewritten
    assert (again.node_features["paper", "feat"].data_ptr(), again.node_features["author", "feat"].data_ptr()) == pointers
    assert torch.equal(again.node_features["author", "feat"], store["node", "author", "feat"].data[[4, 5, 6]])
    assert [(kind, key) for kind, key, _ in fetcher.fetched_features()] == [
        ("node", ("paper", "feat")), ("node", ("author", "feat"))
    ]
