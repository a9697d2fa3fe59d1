"""``MiniBatch.to_pyg()`` of typed batches: PyG's heterogeneous NeighborLoader contract.

Checked against a plain-Python reference of NeighborLoader's hetero semantics (per hop,
the nodes first reached at the previous hop take their sampled in-edges of every edge
type; their unseen sources are the hop's new nodes, per type), built from a
``layout="block"`` batch's sampled in-edges; the ``"pyg"`` layout batch with the same
seed must give the same HeteroData, field by field. ``trim_to_layer`` on the result must
not change a HeteroConv model's outputs for the seeds.
"""

from dataclasses import replace

import pytest
import torch

pytest.importorskip("torch_geometric")

from torch_geometric.nn import HeteroConv, SAGEConv  # noqa: E402
from torch_geometric.utils import trim_to_layer  # noqa: E402

import graphpipe as gp  # noqa: E402
from hetero_graphs import uniform_typed_edges  # noqa: E402

NUM_NODES = {"author": 60, "inst": 12, "paper": 80}
NUM_EDGES = {
    "author:affiliated:inst": 70,
    "author:writes:paper": 240,
    "paper:cites:paper": 300,
    "paper:written_by:author": 240,
}
BATCH_SIZE = 8


def _setup():
    g = torch.Generator().manual_seed(0)
    edges = uniform_typed_edges(NUM_NODES, NUM_EDGES, g)
    graph = gp.CSCGraph.from_hetero_edges(edges, NUM_NODES)
    node_tables = {t: torch.randn(n, 4, generator=g) for t, n in NUM_NODES.items()}
    edge_tables = {etype: torch.randn(m, 2, generator=g) for etype, m in NUM_EDGES.items()}
    labels = {"paper": torch.arange(NUM_NODES["paper"]) % 5, "author": torch.arange(NUM_NODES["author"]) % 3}
    items = gp.HeteroItemSet(
        {t: gp.ItemSet((torch.arange(NUM_NODES[t]), labels[t]), names=("seeds", "labels")) for t in ("author", "paper")}
    )
    return edges, graph, node_tables, edge_tables, labels, items


EDGES, GRAPH, NODE_TABLES, EDGE_TABLES, LABELS, ITEMS = _setup()
SAMPLERS = {"neighbor": "sample_neighbor", "labor-0": "sample_layer_neighbor"}


def _batches(layout, sampler="neighbor", fanouts=(3, 2), num_batches=3, shuffle=True):
    """Typed batches with node features ``(t, "feat")`` and edge features ``(etype, "w")``
    fetched by hand from the tables (the typed fetcher's layout)."""
    pipe = gp.ItemSampler(ITEMS, BATCH_SIZE, shuffle=shuffle, seed=0)
    pipe = getattr(pipe, SAMPLERS[sampler])(GRAPH, list(fanouts), seed=1, layout=layout)
    batches = []
    for mb in pipe:
        mb.node_features = {(t, "feat"): NODE_TABLES[t][ids] for t, ids in mb.input_nodes.items()}
        mb.edge_features = [
            {(etype, "w"): EDGE_TABLES[etype][ids] for etype, ids in sg.original_edge_ids.items()}
            for sg in mb.sampled_subgraphs
        ]
        batches.append(mb)
        if len(batches) == num_batches:
            break
    assert len(batches) == num_batches  # the callers' loops run
    return batches


def _reference(block_batch):
    """NeighborLoader's subgraph by BFS over the block batch's sampled in-edges.

    Returns ``(nodes, edges)``: ``nodes[t][k]`` the sorted type-local ids of type ``t``
    first reached at hop ``k``; ``edges`` a set of ``(etype, src, dst, edge id, hop)``.
    """
    layers = block_batch.sampled_subgraphs
    num_layers = len(layers)
    in_edges = []  # per layer: (dst type, dst id) -> [(etype, src type, src id, edge id)]
    for sg in layers:
        table = {}
        for etype, csc in sg.sampled_csc.items():
            src_type, _, dst_type = etype.split(":")
            rows, cols = sg.original_row_node_ids[src_type], sg.original_column_node_ids[dst_type]
            for j in range(cols.numel()):
                for e in range(int(csc.indptr[j]), int(csc.indptr[j + 1])):
                    table.setdefault((dst_type, int(cols[j])), []).append(
                        (etype, src_type, int(rows[csc.indices[e]]), int(sg.original_edge_ids[etype][e]))
                    )
        in_edges.append(table)
    seen = {t: set() for t in NUM_NODES}
    nodes = {t: [[] for _ in range(num_layers + 1)] for t in NUM_NODES}
    for t, ids in block_batch.seeds.items():
        nodes[t][0] = ids.tolist()
        seen[t].update(nodes[t][0])
    edges = set()
    for hop in range(1, num_layers + 1):
        for t in NUM_NODES:
            for v in nodes[t][hop - 1]:
                for etype, src_type, u, eid in in_edges[num_layers - hop].get((t, v), []):
                    edges.add((etype, u, v, eid, hop))
                    if u not in seen[src_type]:
                        seen[src_type].add(u)
                        nodes[src_type][hop].append(u)
        for t in NUM_NODES:
            nodes[t][hop].sort()
    return nodes, edges


def _hops(counts):
    bounds = torch.tensor([0, *counts]).cumsum(0).tolist()
    return list(zip(bounds[:-1], bounds[1:]))


def _structure(data):
    """``(nodes, edges)`` of a HeteroData in the form of :func:`_reference`."""
    nodes = {
        t: [data[t].n_id[a:b].tolist() for a, b in _hops(data[t].num_sampled_nodes)] for t in data.node_types
    }
    edges = set()
    for key in data.edge_types:
        src_type, rel, dst_type = key
        store = data[key]
        for hop, (a, b) in enumerate(_hops(store.num_sampled_edges), start=1):
            src = data[src_type].n_id[store.edge_index[0, a:b]]
            dst = data[dst_type].n_id[store.edge_index[1, a:b]]
            etype = f"{src_type}:{rel}:{dst_type}"
            edges.update((etype, u, v, e, hop) for u, v, e in zip(src.tolist(), dst.tolist(), store.e_id[a:b].tolist()))
    return nodes, edges


@pytest.mark.parametrize("sampler", list(SAMPLERS))
@pytest.mark.parametrize("fanouts", [(3, 2), (3, 2, 2)])
def test_both_layouts_give_the_reference_subgraph(sampler, fanouts):
    for block, pyg in zip(_batches("block", sampler, fanouts), _batches("pyg", sampler, fanouts)):
        nodes, edges = _reference(block)
        assert sum(len(hop) for t in nodes for hop in nodes[t][1:]) > 0 and len(edges) > 0
        for data in (block.to_pyg(), pyg.to_pyg()):
            got_nodes, got_edges = _structure(data)
            assert got_nodes == nodes
            assert got_edges == edges
            # Every edge type's list has one entry per edge: no duplicates hidden by the set.
            assert sum(data[key].num_edges for key in data.edge_types) == len(edges)


@pytest.mark.parametrize("sampler", list(SAMPLERS))
@pytest.mark.parametrize("fanouts", [(3, 2), (3, 2, 2)])
def test_block_layout_equals_pyg_layout_field_by_field(sampler, fanouts):
    for block, pyg in zip(_batches("block", sampler, fanouts), _batches("pyg", sampler, fanouts)):
        a, b = block.to_pyg(), pyg.to_pyg()
        assert a.node_types == b.node_types and a.edge_types == b.edge_types
        for key in a.node_types + a.edge_types:
            assert set(a[key].keys()) == set(b[key].keys()), key
            for name in a[key].keys():
                if isinstance(a[key][name], torch.Tensor):
                    assert torch.equal(a[key][name], b[key][name]), (key, name)
                else:
                    assert a[key][name] == b[key][name], (key, name)
        for key in a.edge_types:
            assert ("edge_weight" in a[key]) == (sampler == "labor-0")
        # The pyg layout samples only NeighborLoader's nodes; the block layout more.
        assert sum(v.numel() for v in pyg.input_nodes.values()) < sum(v.numel() for v in block.input_nodes.values())


@pytest.mark.parametrize("layout", ["pyg", "block"])
def test_hetero_data_fields(layout):
    for mb in _batches(layout, "labor-0"):
        data = mb.to_pyg()
        assert set(data.node_types) == set(NUM_NODES)
        assert set(data.edge_types) == {tuple(etype.split(":")) for etype in NUM_EDGES}
        for t in data.node_types:
            store = data[t]
            assert len(store.num_sampled_nodes) == 3 and sum(store.num_sampled_nodes) == store.num_nodes
            assert store.n_id.unique().numel() == store.n_id.numel()
            assert torch.equal(store.x, NODE_TABLES[t][store.n_id])
        for t, seeds in mb.seeds.items():
            store = data[t]
            assert store.batch_size == seeds.numel() == store.num_sampled_nodes[0]
            assert torch.equal(store.n_id[: store.batch_size], seeds)
            assert torch.equal(store.y, LABELS[t][seeds])
            assert torch.equal(store.input_id, mb.item_ids[t])
        for t in set(NUM_NODES) - set(mb.seeds):
            assert "batch_size" not in data[t] and "y" not in data[t] and data[t].num_sampled_nodes[0] == 0
        for key in data.edge_types:
            store = data[key]
            src_type, _, dst_type = key
            etype = ":".join(key)
            assert len(store.num_sampled_edges) == 2 and sum(store.num_sampled_edges) == store.num_edges
            # e_id are columns of the edge list the graph was built from.
            assert torch.equal(EDGES[etype][0, store.e_id], data[src_type].n_id[store.edge_index[0]])
            assert torch.equal(EDGES[etype][1, store.e_id], data[dst_type].n_id[store.edge_index[1]])
            assert torch.equal(store.edge_attr, EDGE_TABLES[etype][store.e_id])
            assert store.edge_weight.dtype == torch.float32 and store.edge_weight.numel() == store.num_edges
            # LABOR's mean-estimator weights 1 / (in-degree * probability) lie in (0, 1].
            assert bool((store.edge_weight > 0).all() and (store.edge_weight <= 1).all())
            if layout == "pyg":  # hop k's edges are layer L - k's, as sampled
                sampled = [sg.edge_weights[etype] for sg in reversed(mb.sampled_subgraphs)]
                assert torch.equal(store.edge_weight, torch.cat(sampled))


def test_label_key_and_feature_choice():
    mb = _batches("block", num_batches=1)[0]
    mb.node_features.update({(t, "y"): LABELS[t][mb.input_nodes[t]] for t in LABELS})
    data = mb.to_pyg()  # the feature "y" is the label, "feat" the only other: x
    for t in LABELS:
        assert torch.equal(data[t].y, LABELS[t][data[t].n_id])  # one label per node
        assert torch.equal(data[t].x, NODE_TABLES[t][data[t].n_id])
    assert "y" not in data["inst"]
    data = mb.to_pyg(node_feature_key="y", label_key="y")
    assert torch.equal(data["paper"].x, data["paper"].y)
    mb.node_features[("paper", "other")] = mb.node_features[("paper", "feat")]
    data = mb.to_pyg()  # "feat" is x (PyG's "x" would be), the others keep their names
    assert torch.equal(data["paper"].other, data["paper"].x)
    renamed = {(t, "h" if name == "feat" else name): value for (t, name), value in mb.node_features.items()}
    with pytest.raises(ValueError, match="node_feature_key"):
        replace(mb, node_features=renamed).to_pyg()
    with pytest.raises(KeyError, match="unknown label_key 'label'"):
        mb.to_pyg(node_feature_key="feat", label_key="label")
    mb.edge_features[0][("paper:cites:paper", "w2")] = mb.edge_features[0][("paper:cites:paper", "w")]
    data = mb.to_pyg(node_feature_key="feat")  # two edge feature names and no choice: no edge_attr
    assert all("edge_attr" not in data[key] for key in data.edge_types)
    # PyG's own name on one edge type (from_pyg keeps it) is that type's edge_attr; the others keep theirs.
    writes = next(etype for etype in NUM_EDGES if "writes" in etype)
    mb.edge_features = [{(t, "edge_attr" if t == writes else name): x for (t, name), x in layer.items() if name == "w"}
                        for layer in mb.edge_features]  # fmt: skip
    data = mb.to_pyg(node_feature_key="feat")
    for etype in NUM_EDGES:
        store = data[tuple(etype.split(":"))]
        assert ("edge_attr" in store) == (etype == writes) and ("w" in store) == (etype != writes)
        assert torch.equal(store.edge_attr if etype == writes else store.w, EDGE_TABLES[etype][store.e_id])
    mb.node_features = {"feat": NODE_TABLES["paper"]}
    with pytest.raises(ValueError, match=r"\(type, name\)"):
        mb.to_pyg()


class HeteroSAGE(torch.nn.Module):
    """PyG's hetero trim-to-layer model: one HeteroConv of SAGEConvs per layer."""

    def __init__(self, edge_types, num_layers):
        super().__init__()
        self.convs = torch.nn.ModuleList(
            HeteroConv({key: SAGEConv(4 if i == 0 else 8, 8) for key in edge_types}, aggr="sum")
            for i in range(num_layers)
        )

    def forward(self, x_dict, edge_index_dict, num_sampled_nodes=None, num_sampled_edges=None):
        sizes = []
        for i, conv in enumerate(self.convs):
            if num_sampled_nodes is not None:
                x_dict, edge_index_dict, _ = trim_to_layer(
                    i, num_sampled_nodes, num_sampled_edges, x_dict, edge_index_dict
                )
            sizes.append(sum(x.size(0) for x in x_dict.values()))
            out = conv(x_dict, edge_index_dict)
            x_dict = {t: out[t].relu() if t in out else x for t, x in x_dict.items()}
        return x_dict, sizes


@pytest.mark.parametrize("layout", ["pyg", "block"])
@pytest.mark.parametrize("fanouts", [(3, 2), (4, 3, 2)])
def test_trim_to_layer_keeps_the_seed_outputs(layout, fanouts):
    torch.manual_seed(0)
    model = HeteroSAGE([tuple(etype.split(":")) for etype in NUM_EDGES], len(fanouts)).eval()
    for mb in _batches(layout, fanouts=fanouts, num_batches=2):
        data = mb.to_pyg()
        full, full_sizes = model(data.x_dict, data.edge_index_dict)
        trimmed, trimmed_sizes = model(
            data.x_dict, data.edge_index_dict, data.num_sampled_nodes_dict, data.num_sampled_edges_dict
        )
        assert trimmed_sizes[-1] < full_sizes[-1]  # trimming dropped nodes
        for t, seeds in mb.seeds.items():
            n = seeds.numel()
            torch.testing.assert_close(trimmed[t][:n], full[t][:n], rtol=1e-5, atol=1e-5)


def _with_features(mb):
    mb.node_features = {(t, "feat"): NODE_TABLES[t][ids] for t, ids in mb.input_nodes.items()}
    return mb


@pytest.mark.parametrize("layout", ["pyg", "block"])
def test_an_epoch_of_hetero_data_from_a_loader(layout):
    """``pipe.transform(MiniBatch.to_pyg)`` in a DataLoader: one HeteroData per batch,
    the batch that straddles two seed types carries both, and an epoch covers every item."""
    pipe = gp.ItemSampler(ITEMS, BATCH_SIZE, shuffle=False).sample_neighbor(GRAPH, [3, 2], seed=1, layout=layout)
    loader = gp.DataLoader(pipe.transform(_with_features).transform(gp.MiniBatch.to_pyg))
    seen = {t: [] for t in ("author", "paper")}
    sizes, num_seed_types = [], []
    for data in loader:
        seed_types = [t for t in data.node_types if "batch_size" in data[t]]
        sizes.append(sum(data[t].batch_size for t in seed_types))
        num_seed_types.append(len(seed_types))
        for t in seed_types:
            seeds = data[t].n_id[: data[t].batch_size]
            assert torch.equal(data[t].y, LABELS[t][seeds])
            assert torch.equal(data[t].x[: data[t].batch_size], NODE_TABLES[t][seeds])
            seen[t].append(seeds)
    assert all(size == BATCH_SIZE for size in sizes[:-1])
    for t, parts in seen.items():
        assert torch.equal(torch.cat(parts).sort().values, torch.arange(NUM_NODES[t]))
    assert num_seed_types.count(2) == 1  # 60 authors, then papers: batch 7 holds 4 of each
