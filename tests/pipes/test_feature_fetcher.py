"""FeatureFetcher on untyped and typed batches (typed: dict keys per type, GraphBolt's layout);
an untyped batch is the one-type case, so each property is one test over both."""

import dataclasses
import gc
import pickle

import numpy as np
import pytest
import torch

import graphpipe as gp
import graphpipe.features.store
import graphpipe.ops.gather
import graphpipe.pipes.feature_fetcher
from graphpipe import (
    CPUCachedFeature,
    CSCFormat,
    CSCGraph,
    DiskBasedFeature,
    Feature,
    FeatureStore,
    GPUCachedFeature,
    ItemSampler,
    ItemSet,
    MiniBatch,
    SampledSubgraph,
)
from graphpipe.batch.item_set import HeteroItemSet
from graphpipe.pipes import FeatureFetcher

WRITES, CITES = "author:writes:paper", "paper:cites:paper"
NUM_NODES = {"author": 20, "paper": 30}
CASES = ["untyped", "typed"]


def _per_type(field):
    """A batch field as type -> tensor: an untyped one is the one type None."""
    return field if isinstance(field, dict) else {None: field}


def _own_ids(num_rows):
    """``[num_rows, 2]``: each row holds its own id, so a fetched row says where it came from."""
    return torch.arange(num_rows).repeat(2, 1).t().contiguous()


def _sampled_case(case, layout="block", fanouts=(3, 2)):
    """``(edges {type: (src, dst)}, store, pipe, node keys, edge keys)``: a sampler over a graph
    whose features hold their own node or edge id (per type when typed)."""
    g = torch.Generator().manual_seed(0)
    if case == "typed":
        edges = {
            WRITES: (torch.randint(0, 20, (50,), generator=g), torch.randint(0, 30, (50,), generator=g)),
            CITES: tuple(torch.randint(0, 30, (2, 70), generator=g)),
        }
        graph = CSCGraph.from_hetero_edges({t: torch.stack(e) for t, e in edges.items()}, NUM_NODES)
        # Each edge type's "eid" is its type-local edge id: the position in its input edge list.
        store = FeatureStore(
            {("paper", "id"): _own_ids(30), ("author", "id"): _own_ids(20)},
            {(("author", "writes", "paper"), "eid"): torch.arange(50), (CITES, "eid"): torch.arange(70)},
        )
        items = HeteroItemSet({"paper": ItemSet(30), "author": ItemSet(20)})
        node_keys = {"paper": ["id"], "author": ["id"]}
        edge_keys = {("author", "writes", "paper"): ["eid"], CITES: ["eid"]}
    else:
        edges = {None: tuple(torch.randint(0, 100, (2, 400), generator=g))}
        graph = CSCGraph.from_coo(*edges[None], num_nodes=100)
        store = FeatureStore({"id": _own_ids(100)}, {"eid": np.arange(400)})
        items = ItemSet(100)
        node_keys, edge_keys = ["id"], ["eid"]
    pipe = ItemSampler(items, batch_size=8, shuffle=True, seed=0).sample_neighbor(graph, list(fanouts), seed=1, layout=layout)
    return edges, store, pipe, node_keys, edge_keys


@pytest.mark.parametrize("case, layout", [("untyped", "block"), ("typed", "block"), ("typed", "pyg")])
def test_rows_belong_to_the_sampled_nodes_and_edges(case, layout):
    edges, store, pipe, node_keys, edge_keys = _sampled_case(case, layout)
    pipe = pipe.fetch_feature(store, node_feature_keys=node_keys, edge_feature_keys=edge_keys)
    if case == "typed":  # tuple edge types normalised to strings
        assert pipe.typed and pipe.edge_feature_keys == {WRITES: ["eid"], CITES: ["eid"]}
    num_edges = dict.fromkeys(edges, 0)
    for mb in pipe:
        input_nodes = _per_type(mb.input_nodes)
        assert len(mb.node_features) == len(input_nodes)
        for node_type, ids in input_nodes.items():
            rows = mb.node_features["id" if node_type is None else (node_type, "id")]
            assert torch.equal(rows, ids.repeat(2, 1).t())
        assert len(mb.edge_features) == 2
        for layer, subgraph in zip(mb.edge_features, mb.sampled_subgraphs):
            assert len(layer) == len(edges)
            for etype, (src, _) in edges.items():
                eids = layer["eid" if etype is None else (etype, "eid")]
                assert torch.equal(eids, _per_type(subgraph.original_edge_ids)[etype])
                # The edge id names the sampled edge: its source in the input edge list is the sampled source.
                rows = _per_type(subgraph.original_row_node_ids)[None if etype is None else etype.split(":")[0]]
                assert torch.equal(src[eids], rows[_per_type(subgraph.sampled_csc)[etype].indices])
                num_edges[etype] += eids.numel()
    assert all(count > 0 for count in num_edges.values())


def _layer(src, dst_count, edge_ids, indptr):
    src = torch.tensor(src)
    return SampledSubgraph(
        sampled_csc=CSCFormat(torch.tensor(indptr), torch.zeros(len(edge_ids), dtype=torch.int64)),
        original_row_node_ids=src,
        original_column_node_ids=src[:dst_count],
        original_edge_ids=torch.tensor(edge_ids),
    )


def _two_layer_batch():
    # seeds [7, 3] <- layer 1 sources [7, 3, 12, 0] <- layer 0 sources [7, 3, 12, 0, 29]
    top = _layer([7, 3, 12, 0], 2, [5, 40, 41], [0, 1, 3])
    bottom = _layer([7, 3, 12, 0, 29], 4, [5, 6, 40, 59, 1], [0, 2, 3, 4, 5])
    return MiniBatch(
        seeds=torch.tensor([7, 3]),
        sampled_subgraphs=[bottom, top],
        input_nodes=bottom.original_row_node_ids,
        node_features={"kept": torch.ones(5)},
        batch_index=4,
    )


def _store():
    g = torch.Generator().manual_seed(0)
    return FeatureStore(
        {"feat": torch.randn(30, 4, generator=g), "deg": np.arange(30, dtype=np.int64)},
        {"w": torch.rand(60, generator=g), "type": torch.randint(0, 3, (60, 2), generator=g)},
    )


def test_a_users_batch_gets_every_feature_and_keeps_the_rest(tmp_path):
    store = _store()
    table = np.random.default_rng(1).standard_normal((30, 3)).astype(np.float16)
    np.save(tmp_path / "x.npy", table)
    store = FeatureStore({**{k: store[k] for k in store.node_keys}, "x": str(tmp_path / "x.npy")},
                         {k: store["edge", k] for k in store.edge_keys})
    fetcher = FeatureFetcher([], store, node_feature_keys=["feat", "deg", "x"], edge_feature_keys=["w", "type"])
    mb = _two_layer_batch()
    out = fetcher.fetch(mb)
    assert torch.equal(out.node_features["feat"], store["feat"].data[[7, 3, 12, 0, 29]])
    assert out.node_features["deg"].tolist() == [7, 3, 12, 0, 29]
    assert np.array_equal(out.node_features["x"].numpy(), table[[7, 3, 12, 0, 29]])  # a memory map, float16
    assert torch.equal(out.node_features["kept"], torch.ones(5))
    assert len(out.edge_features) == 2
    for layer, subgraph in zip(out.edge_features, out.sampled_subgraphs):
        eids = subgraph.original_edge_ids
        assert torch.equal(layer["w"], store["edge", "w"].data[eids])
        assert torch.equal(layer["type"], store["edge", "type"].data[eids])
    # The input batch is left as it was, and the rest of the batch is carried over.
    assert list(mb.node_features) == ["kept"] and mb.edge_features == []
    assert out.batch_index == 4 and out.sampled_subgraphs is mb.sampled_subgraphs
    # A user's stage that sets input_nodes without layers: rows are input_nodes', as the batch's contract says.
    own = MiniBatch(seeds=torch.tensor([3, 0]), input_nodes=torch.tensor([3, 0, 12, 29]))
    assert FeatureFetcher([], store, ["deg"]).fetch(own).node_features["deg"].tolist() == [3, 0, 12, 29]  # deg: the id


@pytest.mark.parametrize("case", CASES)
def test_seeds_only_batches_get_seed_features_through_the_pipe(case):
    _, store, _, node_keys, _ = _sampled_case(case)
    if case == "typed":
        labels = torch.arange(30) % 3
        items = HeteroItemSet({"paper": ItemSet((torch.arange(30), labels), names=("seeds", "labels"))})
    else:
        labels = torch.arange(100) % 3
        items = ItemSet((torch.arange(100), labels), names=("seeds", "labels"))
    pipe = ItemSampler(items, batch_size=8, shuffle=True, seed=1).fetch_feature(store, node_feature_keys=node_keys)
    assert isinstance(pipe, FeatureFetcher)
    seen = []
    for mb in pipe:
        seeds = _per_type(mb.seeds)
        rows = {t: mb.node_features["id" if t is None else (t, "id")] for t in _per_type(node_keys)}
        for node_type, ids in seeds.items():
            assert torch.equal(rows[node_type][:, 0], ids)
            assert torch.equal(_per_type(mb.labels)[node_type], labels[ids])
            seen += ids.tolist()
        if case == "typed":  # a type with no seeds: an empty [0, *row_shape] table
            assert rows["author"].shape == (0, 2)
    assert sorted(seen) == list(range(len(labels)))


def test_types_without_nodes_or_edges_get_empty_rows_of_the_right_shape():
    _, store, sampler, _, _ = _sampled_case("typed")
    graph = sampler.graph
    # Paper seeds, and author:writes:paper never sampled: no author nodes, no writes edges.
    pipe = ItemSampler(HeteroItemSet({"paper": ItemSet(30)}), batch_size=8).sample_neighbor(graph, [{WRITES: 0, CITES: 2}])
    fetcher = pipe.fetch_feature(
        store, node_feature_keys={"paper": ["id"], "author": ["id"]}, edge_feature_keys={WRITES: ["eid"], CITES: ["eid"]}
    )
    out = next(iter(fetcher))
    assert out.input_nodes["author"].numel() == 0 and out.input_nodes["paper"].numel() >= 8
    assert out.node_features["author", "id"].shape == (0, 2) and out.node_features["author", "id"].dtype == torch.int64
    assert out.edge_features[0][WRITES, "eid"].shape == (0,)
    assert torch.equal(out.edge_features[0][CITES, "eid"], out.sampled_subgraphs[0].original_edge_ids[CITES])


@pytest.mark.parametrize(
    "case, keys, error, match",
    [
        ("untyped", dict(node_feature_keys=["id", "fet"]), KeyError,
         r"unknown node feature\(s\) \['fet'\] \(`node_feature_keys`\); the store's node features: \['id'\]"),
        ("untyped", dict(edge_feature_keys=["id"]), KeyError, r"unknown edge feature\(s\) \['id'\].*: \['eid'\]"),
        ("untyped", dict(node_feature_keys="id"), TypeError, r"`node_feature_keys` must be a list of names, got the string 'id'"),
        ("untyped", dict(node_feature_keys={"paper": ["id"]}), TypeError,
         r"graph of the upstream NeighborSampler is homogeneous, so `node_feature_keys` must be a list of names"),
        ("typed", dict(node_feature_keys={"paper": ["id"], "author": ["year"]}), KeyError,
         r"unknown node feature\(s\) \['year'\] of type 'author' \(`node_feature_keys\['author'\]`\); the store's "
         r"node features of type 'author': \['id'\]"),
        ("typed", dict(node_feature_keys={"venue": ["id"]}), ValueError,
         r"`node_feature_keys` names node type 'venue', which the graph of the upstream NeighborSampler lacks; "
         r"known node types: \['author', 'paper'\]"),
        ("typed", dict(edge_feature_keys={("paper", "cited_by", "paper"): ["eid"]}), ValueError,
         r"`edge_feature_keys` names edge type 'paper:cited_by:paper'.*known edge types: \['author:writes:paper', "
         r"'paper:cites:paper'\]"),
        ("typed", dict(node_feature_keys=["id"]), TypeError,  # the typed store has no plain "id": same advice
         r"heterogeneous, so `node_feature_keys` / `edge_feature_keys` must be dicts of type -> names, e\.g\. "
         r"node_feature_keys=\{'author': \['id'\]\}"),
        ("typed", dict(node_feature_keys={"paper": ["id"]}, edge_feature_keys=["eid"]), TypeError,
         r"`edge_feature_keys` must be a dict of edge type -> names"),
        ("typed", dict(node_feature_keys={"paper": "id"}), TypeError,
         r"`node_feature_keys\['paper'\]` must be a list of names, got 'id'"),
    ],
)
def test_construction_errors_name_the_argument_and_what_is_known(case, keys, error, match):
    _, store, pipe, _, _ = _sampled_case(case)
    with pytest.raises(error, match=match):
        pipe.fetch_feature(store, **keys)


def test_a_store_that_is_not_one_is_refused():
    with pytest.raises(TypeError, match=r"`features` must be a graphpipe.FeatureStore, got dict"):
        FeatureFetcher([], {"feat": torch.zeros(3)}, node_feature_keys=["feat"])


def test_graphbolts_overlap_fetch_is_accepted_in_its_place():
    """Found in review: GraphBolt's examples pass ``overlap_fetch=`` (its fifth argument)
    to fetch_feature, which raised TypeError; positionally it was taken for ``cooperative``."""
    store = _store()
    batch = MiniBatch(seeds=torch.tensor([1, 2]))
    for fetcher in (FeatureFetcher([], store, ["feat"], [], True), FeatureFetcher([], store, ["feat"], overlap_fetch=False)):
        assert not fetcher.cooperative and torch.equal(fetcher.fetch(batch).node_features["feat"], store.read("node", None, "feat", torch.tensor([1, 2])))
    with pytest.raises(TypeError, match=r"`overlap_fetch` must be a bool \(GraphBolt's flag"):
        FeatureFetcher([], store, ["feat"], overlap_fetch="yes")


def test_batches_missing_what_is_asked_for():
    store = _store()
    with pytest.raises(ValueError, match=r"edge features need `sampled_subgraphs`"):
        FeatureFetcher([], store, edge_feature_keys=["w"]).fetch(MiniBatch(seeds=torch.tensor([1])))
    with pytest.raises(ValueError, match=r"neither `input_nodes` nor `seeds`"):
        FeatureFetcher([], store, node_feature_keys=["feat"]).fetch(MiniBatch())


@pytest.mark.parametrize(
    "case, node, edge, keys, match",
    [
        ("untyped", {"id": torch.zeros(95, 2)}, {}, dict(node_feature_keys=["id"]),
         r"node feature 'id' has 95 rows, .* has 100 nodes"),
        ("untyped", {}, {"eid": torch.zeros(100)}, dict(edge_feature_keys=["eid"]),
         r"edge feature 'eid' has 100 rows, .* has 400 edges"),
        ("typed", {("paper", "id"): torch.zeros(20, 2)}, {}, dict(node_feature_keys={"paper": ["id"]}),
         r"node feature 'id' of type 'paper' has 20 rows, but the graph of the upstream NeighborSampler has 30 "
         r"nodes of type 'paper'"),
        # Counted per edge type: 60 rows cover author:writes:paper (50 edges), not paper:cites:paper (70).
        ("typed", {}, {(WRITES, "eid"): torch.zeros(60), (CITES, "eid"): torch.zeros(60)},
         dict(edge_feature_keys={WRITES: ["eid"], CITES: ["eid"]}),
         r"edge feature 'eid' of type 'paper:cites:paper' has 60 rows, but the graph of the upstream "
         r"NeighborSampler has 70 edges of type 'paper:cites:paper'"),
    ],
)
def test_tables_of_the_wrong_size_fail_at_construction(case, node, edge, keys, match):
    _, _, pipe, _, _ = _sampled_case(case)
    store = FeatureStore(node, edge)
    # found through the sampler upstream, also when other stages sit in between
    for chain in (pipe, pipe.transform(lambda mb: mb)):
        with pytest.raises(ValueError, match=r"FeatureFetcher: " + match):
            chain.fetch_feature(store, **keys)


@pytest.mark.parametrize("case", CASES)
def test_tables_with_more_rows_than_the_graph_are_accepted(case):
    """GraphBolt and PyG accept padded tables (or nodes added later)."""
    edges, store, pipe, node_keys, edge_keys = _sampled_case(case)
    padded = FeatureStore(
        {k: torch.cat([store["node", k].data, torch.zeros(10, 2, dtype=torch.int64)]) for k in store.node_keys},
        {k: torch.cat([torch.as_tensor(store["edge", k].data), torch.zeros(3, dtype=torch.int64)]) for k in store.edge_keys},
    )
    batches = list(pipe.fetch_feature(padded, node_feature_keys=node_keys, edge_feature_keys=edge_keys))
    assert len(batches) == len(pipe) > 0
    for mb in batches:
        for node_type, ids in _per_type(mb.input_nodes).items():
            assert torch.equal(mb.node_features["id" if node_type is None else (node_type, "id")][:, 0], ids)


def _count_id_checks(monkeypatch):
    """Count the range checks of ids, wherever the fetcher or a feature would make them."""
    calls = []
    check = graphpipe.pipes.feature_fetcher.check_node_ids

    def counted(*args, **kwargs):
        calls.append(args[2])
        return check(*args, **kwargs)

    for module in (graphpipe.pipes.feature_fetcher, graphpipe.features.store, graphpipe.ops.gather):
        monkeypatch.setattr(module, "check_node_ids", counted)
    return calls


@pytest.mark.parametrize("case", CASES)
def test_a_samplers_ids_are_read_unchecked_and_a_users_are_checked(case, monkeypatch):
    _, store, pipe, node_keys, edge_keys = _sampled_case(case)
    fetcher = pipe.fetch_feature(store, node_feature_keys=node_keys, edge_feature_keys=edge_keys)
    batches = list(pipe)
    calls = _count_id_checks(monkeypatch)
    for mb in batches:
        fetcher.fetch(mb)
    assert calls == []  # the sampler made them, and the tables' sizes were checked against its graph
    users = FeatureFetcher([], store, node_feature_keys=node_keys, edge_feature_keys=edge_keys)
    users.fetch(batches[0])
    num_types = {"untyped": (1, 1), "typed": (2, 2)}[case]
    assert len(calls) == num_types[0] + 2 * num_types[1]  # each read once: node ids, then each layer's edge ids


def test_a_samplers_ids_stay_unchecked_through_a_copy(monkeypatch):
    _, store, pipe, node_keys, edge_keys = _sampled_case("untyped")
    fetcher = pipe.copy_to("cpu").fetch_feature(store, node_feature_keys=node_keys, edge_feature_keys=edge_keys)
    batches = list(pipe)
    calls = _count_id_checks(monkeypatch)
    for mb in batches:
        fetcher.fetch(mb)
    assert calls == []  # a stage declaring role "copy" moves batches, it does not change their ids


@pytest.mark.parametrize("kind", ["tensor", "npy", "disk", "cpu_cache", "gpu_cache"])
def test_ids_a_stage_after_the_sampler_changed_are_checked_for_every_kind_of_feature(kind, tmp_path):
    """A user's stage between the sampler and the fetcher may change the ids: they are
    checked, with the same error for every kind of feature (no rows read out of bounds)."""
    table = _own_ids(100)
    np.save(tmp_path / "id.npy", table.numpy())
    feature = {
        "tensor": lambda: table,
        "npy": lambda: str(tmp_path / "id.npy"),
        "disk": lambda: DiskBasedFeature(tmp_path / "id.npy"),
        "cpu_cache": lambda: CPUCachedFeature(Feature(table), 10 * 16),
        "gpu_cache": lambda: GPUCachedFeature(Feature(table), 10 * 16, device="cpu"),
    }[kind]()
    _, _, pipe, _, _ = _sampled_case("untyped")
    shifted = pipe.transform(lambda mb: dataclasses.replace(mb, input_nodes=mb.input_nodes + 100))
    fetcher = shifted.fetch_feature(FeatureStore({"id": feature}), ["id"])
    with pytest.raises(ValueError, match=r"FeatureFetcher: node feature 'id' \(100 rows\): `input_nodes` holds node id "
                       r"1\d\d, out of range: valid ids are 0\.\.99 \(num_nodes=100\)"):
        next(iter(fetcher))


@pytest.mark.parametrize("case", CASES)
def test_an_out_of_range_id_in_a_users_batch_is_named_at_fetch_time(case):
    if case == "typed":
        store = FeatureStore({("paper", "feat"): torch.zeros(30, 1)})
        fetcher = FeatureFetcher([], store, node_feature_keys={"paper": ["feat"]})
        with pytest.raises(ValueError, match=r"node feature 'feat' of type 'paper' \(30 rows\): `seeds\['paper'\]` "
                           r"holds node id 30"):
            fetcher.fetch(MiniBatch(seeds={"paper": torch.tensor([1, 30])}))
        return
    store = _store()
    batch = _two_layer_batch()
    batch.sampled_subgraphs[0].original_edge_ids[1] = 70
    with pytest.raises(ValueError, match=r"edge feature 'w' \(60 rows\): `sampled_subgraphs\[0\]\.original_edge_ids` "
                       r"holds edge id 70, out of range: valid ids are 0..59 \(num_edges=60\)"):
        FeatureFetcher([], store, edge_feature_keys=["w"]).fetch(batch)
    with pytest.raises(ValueError, match=r"node feature 'feat' \(30 rows\): `seeds` holds node id 30"):
        FeatureFetcher([], store, node_feature_keys=["feat"]).fetch(MiniBatch(seeds=torch.tensor([1, 30])))


@pytest.mark.parametrize("case", CASES)
def test_a_batch_of_the_other_kind_is_refused(case):
    if case == "typed":
        fetcher = FeatureFetcher([], FeatureStore({("paper", "feat"): torch.zeros(3, 1)}), node_feature_keys={"paper": ["feat"]})
        with pytest.raises(TypeError, match=r"the keys are per type \(dicts\), so `seeds` must be a dict of type -> ids"):
            fetcher.fetch(MiniBatch(seeds=torch.tensor([1])))
    else:
        fetcher = FeatureFetcher([], FeatureStore({"feat": torch.zeros(3, 1)}), node_feature_keys=["feat"])
        with pytest.raises(TypeError, match=r"`seeds` is a dict of type -> ids \(a heterogeneous batch\), so the keys "
                           r"must be dicts of type -> names, e\.g\. node_feature_keys=\{'paper': \['feat'\]\}"):
            fetcher.fetch(MiniBatch(seeds={"paper": torch.tensor([1])}))


def _fetch_seeds(fetcher, seeds):
    return fetcher.fetch(MiniBatch(seeds=torch.tensor(seeds)))


def test_rows_a_batch_still_holds_are_never_overwritten():
    """The fetcher reuses its output blocks (no fresh memory to fault in every batch), but
    only blocks no tensor uses any more: batches, or views of them, that the loop keeps
    keep their rows while later batches are fetched."""
    store = _store()
    fetcher = FeatureFetcher([], store, ["feat", "deg"])
    table = store["node", "feat"].data
    kept = [_fetch_seeds(fetcher, [i, (i + 7) % 30]) for i in range(12)]
    view = _fetch_seeds(fetcher, [1, 2, 3]).node_features["feat"][1:]  # only a view survives
    for _ in range(12):
        _fetch_seeds(fetcher, [4, 5, 6])
    for i, minibatch in enumerate(kept):
        assert torch.equal(minibatch.node_features["feat"], table[[i, (i + 7) % 30]])
        assert minibatch.node_features["deg"].tolist() == [i, (i + 7) % 30]
    assert torch.equal(view, table[[2, 3]])


def test_a_released_block_is_reused():
    fetcher = FeatureFetcher([], _store(), ["feat"])
    first = _fetch_seeds(fetcher, [1, 2, 3]).node_features["feat"]
    address = first.data_ptr()
    del first
    again = _fetch_seeds(fetcher, [4, 5]).node_features["feat"]
    assert again.data_ptr() == address
    assert torch.equal(again, _store()["node", "feat"].data[[4, 5]])


def test_a_pickled_fetcher_shares_no_blocks():
    fetcher = FeatureFetcher([], _store(), ["feat"])
    held = _fetch_seeds(fetcher, [1, 2]).node_features["feat"]
    copy = pickle.loads(pickle.dumps(fetcher))
    assert copy._blocks is not fetcher._blocks
    assert torch.equal(_fetch_seeds(copy, [3, 4]).node_features["feat"], _store()["node", "feat"].data[[3, 4]])
    assert torch.equal(held, _store()["node", "feat"].data[[1, 2]])


def test_output_blocks_are_kept_per_kind_type_and_name():
    store = FeatureStore({("paper", "feat"): torch.randn(30, 4), ("author", "feat"): torch.randn(20, 4)})
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


def test_a_users_store_or_feature_overriding_read_reads_the_batches():
    """GraphBolt's way to add a storage is to override ``read`` (its FeatureFetcher calls
    ``store.read("node", None, name, ids)``). Found in review: the fetcher read the table
    underneath, silently skipping the override."""
    graph = gp.CSCGraph.from_coo(torch.arange(6), (torch.arange(6) + 1) % 6, num_nodes=6)
    table = torch.arange(6.0).view(6, 1)

    class PlusThousand(gp.Feature):
        def read(self, ids=None, out=None):
            return super().read(ids, out) + 1000

    class Negated(gp.FeatureStore):
        def read(self, domain, type_name, feature_name, ids=None):
            return -super().read(domain, type_name, feature_name, ids)

    for store, rows in [(gp.FeatureStore({"feat": PlusThousand(table)}), lambda ids: table[ids] + 1000), (Negated({"feat": table}), lambda ids: -table[ids])]:
        pipe = gp.ItemSampler(gp.ItemSet(torch.tensor([0, 1]), names="seeds"), 2).sample_neighbor(graph, [1]).fetch_feature(store, ["feat"])
        for mb in (next(iter(pipe)), next(iter(gp.DataLoader(pipe)))):
            assert torch.equal(mb.node_features["feat"], rows(mb.input_nodes))


def test_a_users_read_runs_in_one_thread_unless_its_class_says_otherwise():
    """Found in review: a user's ``read`` (a seek and a read on one open file) inherited
    ``concurrent_reads = True``, so the default placement fetched batches in a pool and
    13,568 of 22,077 rows were wrong. GraphBolt runs a user's read in one thread."""
    graph = gp.CSCGraph.from_coo(torch.arange(6), (torch.arange(6) + 1) % 6, num_nodes=6)
    table = torch.arange(6.0).view(6, 1)

    class Undeclared(gp.Feature):
        def read(self, ids=None, out=None):
            return super().read(ids, out)

    class Declared(Undeclared):
        concurrent_reads = True

    class SaysOnTheInstance(Undeclared):
        def __init__(self, data):
            super().__init__(data)
            self.concurrent_reads = True

    class Store(gp.FeatureStore):
        def read(self, domain, type_name, feature_name, ids=None):
            return super().read(domain, type_name, feature_name, ids)

    class DeclaredStore(Store):
        concurrent_reads = True

    items = gp.ItemSampler(gp.ItemSet(torch.tensor([0, 1]), names="seeds"), 2).sample_neighbor(graph, [1])
    cases = [
        (gp.FeatureStore({"feat": table}), True),
        (gp.FeatureStore({"feat": Undeclared(table)}), False),
        (gp.FeatureStore({"feat": Declared(table)}), True),
        (gp.FeatureStore({"feat": SaysOnTheInstance(table)}), True),
        (Store({"feat": table}), False),
        (DeclaredStore({"feat": table}), True),
    ]
    for store, concurrent in cases:
        assert items.fetch_feature(store, ["feat"]).thread_safe is concurrent
