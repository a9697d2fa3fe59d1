"""Misuse that used to pass silently or with an unhelpful error: features fetched before
the sampler, and a graph that is not a CSCGraph (errors point to the constructors)."""

import pytest
import torch

import graphpipe as gp


def _graph():
    return gp.CSCGraph.from_coo(torch.tensor([1, 2, 0, 3]), torch.tensor([0, 1, 2, 2]), num_nodes=4)


@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
def test_fetch_feature_before_the_sampler_is_refused_when_the_pipe_is_built(sampler):
    store = gp.FeatureStore({"feat": torch.randn(4, 3)})
    items = gp.ItemSampler(gp.ItemSet(4), 2)
    with pytest.raises(ValueError, match=r"a fetch_feature stage upstream of this sampler .* seeds' rows only; put "
                       r"fetch_feature after the sampler"):
        getattr(items.fetch_feature(store, ["feat"]), sampler)(_graph(), [2])
    with pytest.raises(ValueError, match="fetch_feature stage upstream"):  # also with stages in between
        getattr(items.fetch_feature(store, ["feat"]).transform(lambda mb: mb), sampler)(_graph(), [2])
    getattr(items, sampler)(_graph(), [2]).fetch_feature(store, ["feat"])  # the right order


def _not_graphs():
    from torch_geometric.data import Data

    edge_index = torch.tensor([[1, 2, 0], [0, 1, 2]])
    cases = [
        (Data(edge_index=edge_index, num_nodes=3), r"got Data \(torch_geometric\); graphpipe\.datasets\.from_pyg\(data\)"),
        (edge_index, r"got Tensor \(torch\); a \[2, num_edges\] edge_index .*CSCGraph\.from_edge_index\(edge_index"),
        (edge_index.numpy(), r"got ndarray \(numpy\); .*CSCGraph\.from_coo\(src, dst, num_nodes=\.\.\.\)"),
        ("graph.pt", r"got str; build one with CSCGraph\.from_edge_index"),
    ]
    try:
        import networkx

        cases.append((networkx.path_graph(3), r"got Graph \(networkx\); .*CSCGraph\.from_coo\("))
    except ImportError:
        pass
    return cases


@pytest.mark.parametrize("stage", ["sample_neighbor", "sample_layer_neighbor", "sample_uniform_negative"])
def test_a_graph_that_is_not_a_cscgraph_gets_an_error_naming_it_and_the_constructor(stage):
    pytest.importorskip("torch_geometric")
    items = gp.ItemSampler(gp.ItemSet(torch.tensor([[0, 1]]), names="seeds"), 1)
    for graph, match in _not_graphs():
        with pytest.raises(TypeError, match=r"`graph` must be a graphpipe\.CSCGraph, " + match):
            getattr(items, stage)(graph, [2] if stage != "sample_uniform_negative" else 1)


@pytest.mark.parametrize(
    "build, option",
    [
        (lambda items, g: items.sample_neighbor(g, [2], replace="False"), "replace"),
        (lambda items, g: items.sample_layer_neighbor(g, [2], layer_dependency="False"), "layer_dependency"),
        (lambda items, g: items.sample_neighbor(g, [2], cooperative="False"), "cooperative"),
        (lambda items, g: items.fetch_feature(gp.FeatureStore({"feat": torch.randn(4, 3)}), ["feat"], cooperative=0), "cooperative"),
        (lambda items, g: items.copy_to("cpu", non_blocking="no"), "non_blocking"),
        (lambda items, g: gp.DistributedItemSampler(gp.ItemSet(4), 2, drop_uneven_inputs="False", rank=0, world_size=1), "drop_uneven_inputs"),
    ],
)
def test_a_flag_given_as_another_type_is_refused(build, option):
    """``bool("False")`` is True: ``replace="False"`` sampled with replacement."""
    with pytest.raises(TypeError, match=f"`{option}` must be a bool, got"):
        build(gp.ItemSampler(gp.ItemSet(4), 2), _graph())


@pytest.mark.parametrize("sampler", ["sample_neighbor", "sample_layer_neighbor"])
def test_items_that_do_not_fit_the_graph_are_refused_when_the_pipe_is_built(sampler):
    """Found in review: a seed out of range was refused only when its batch came (199 good
    batches in); an untyped item set over a typed graph (or the reverse, or an unknown
    type) at the first batch. The item set upstream is checked once when the sampler is built."""
    graph = gp.CSCGraph.from_coo(torch.arange(10), (torch.arange(10) + 1) % 10, num_nodes=10)
    typed = gp.CSCGraph.from_hetero_edges({"a:r:b": ([0, 1], [0, 1]), "b:s:a": ([1], [0])}, {"a": 2, "b": 2})

    def build(items, graph, batch_size=2):
        return getattr(gp.ItemSampler(items, batch_size), sampler)(graph, [2])

    late = gp.ItemSet(torch.cat([torch.arange(10).repeat(20), torch.tensor([12])]), names="seeds")
    with pytest.raises(ValueError, match=r"\(the items upstream\): `seeds` holds node id 12, out of range: valid ids are 0\.\.9"):
        build(late, graph)
    with pytest.raises(ValueError, match=r"`seeds` holds node id 10"):
        build(gp.ItemSet(torch.tensor([[0, 1], [2, 10]]), names="seeds"), graph)
    with pytest.raises(ValueError, match=r"`seeds` is a dict of types \['a'\] \(from a HeteroItemSet\), but the graph is homogeneous"):
        build(gp.HeteroItemSet({"a": gp.ItemSet(torch.tensor([0]), names="seeds")}), graph)
    with pytest.raises(ValueError, match="the graph is heterogeneous, so `seeds` must be a dict of node type"):
        build(gp.ItemSet(torch.tensor([0]), names="seeds"), typed)
    with pytest.raises(ValueError, match="`seeds` has unknown node type 'c'"):
        build(gp.HeteroItemSet({"c": gp.ItemSet(torch.tensor([0]), names="seeds")}), typed)
    with pytest.raises(ValueError, match=r"`seeds\['b'\]` holds node id 2"):
        build(gp.HeteroItemSet({"b": gp.ItemSet(torch.tensor([0, 2]), names="seeds")}), typed)
    with pytest.raises(ValueError, match="link seeds on a typed graph are a dict edge type"):
        build(gp.HeteroItemSet({"a:r:c": gp.ItemSet(torch.tensor([[0, 1]]), names="seeds")}), typed)
    assert next(iter(build(gp.HeteroItemSet({"a:r:b": gp.ItemSet(torch.tensor([[0, 1]]), names="seeds")}), typed))).seeds


def test_negatives_or_a_second_sampler_after_a_sampler_are_refused_when_built():
    """Found in review: negatives added after the sampler gave a batch of 128 seeds and 64
    compacted_seeds (no error); a second sampler silently replaced the first's layers."""
    graph = gp.CSCGraph.from_coo(torch.arange(10), (torch.arange(10) + 1) % 10, num_nodes=10)
    pairs = gp.ItemSampler(gp.ItemSet(torch.tensor([[0, 1], [2, 3]]), names="seeds"), 2)
    with pytest.raises(ValueError, match=r"NeighborSampler upstream samples the layers before the negatives exist; add them first"):
        pairs.sample_neighbor(graph, [2]).sample_uniform_negative(graph, 1)
    nodes = gp.ItemSampler(gp.ItemSet(torch.arange(4), names="seeds"), 2)
    with pytest.raises(ValueError, match="NeighborSampler upstream already samples the batches' layers, which this sampler would replace"):
        nodes.sample_neighbor(graph, [2]).sample_layer_neighbor(graph, [2])


def test_a_users_stage_declaring_the_sampler_role_may_precede_the_sampler():
    """Found in review: the one-sampler refusal read ``role == "sampler"``, which a user's
    negative sampler declares to be pooled (README, "Writing a stage")."""

    class MyNegatives(gp.Pipe):
        role, thread_safe = "sampler", True

        def __init__(self, source):
            super().__init__()
            self.source = source

        def process(self, minibatch):
            return minibatch

    graph = gp.CSCGraph.from_coo(torch.arange(10), (torch.arange(10) + 1) % 10, num_nodes=10)
    pairs = gp.ItemSampler(gp.ItemSet(torch.tensor([[0, 1], [2, 3]]), names="seeds"), 2)
    assert next(iter(MyNegatives(pairs).sample_neighbor(graph, [2]))).compacted_seeds.shape == (2, 2)
    assert next(iter(MyNegatives(pairs).sample_uniform_negative(graph, 1))).seeds.shape == (4, 2)


def test_graphbolt_names_graphpipe_has_not_say_what_to_use():
    for name, says in [("from_dglgraph", r"graphpipe.datasets.from_dgl\(graph\).graph"),
                       ("CSCFormatBase", r"graphpipe.CSCFormat"), ("SampledSubgraphImpl", r"graphpipe.SampledSubgraph"),
                       ("CooperativeConvFunction", r"graphpipe.cooperative_exchange")]:
        with pytest.raises(AttributeError, match=rf"no attribute '{name}' \(GraphBolt's\): .*{says}"):
            getattr(gp, name)
    assert not hasattr(gp, "no_such_name") and hasattr(gp, "ItemSampler")
