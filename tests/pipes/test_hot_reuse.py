"""Hot-vertex embedding reuse (NeutronOrch): the bottom layer stops at hot vertices and
only there; reused rows are the bottom module over the hot vertices' own sample with the
recorded weights; staleness stays within 2n - 1 steps; determinism and resume."""

import itertools
import re

import pytest
import torch

import graphpipe as gp
from graphpipe.loading.policy import thread_pool

NUM_NODES, DIM = 600, 8
FANOUTS = [4, 3, 2]


class SAGEConv(torch.nn.Module):
    """Mean aggregation over a block, as examples/node_classification.py."""

    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin_self = torch.nn.Linear(in_dim, out_dim)
        self.lin_neigh = torch.nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, subgraph, h):
        src, dst = subgraph.edge_index()
        num_dst = subgraph.num_dst_nodes
        total = torch.zeros(num_dst, h.size(1), dtype=h.dtype).index_add_(0, dst, h[src])
        degree = torch.bincount(dst, minlength=num_dst).clamp_(min=1).unsqueeze(1)
        return self.lin_self(h[:num_dst]) + self.lin_neigh(total / degree)


def setup(seed=0):
    gen = torch.Generator().manual_seed(seed)
    dst = torch.randint(0, NUM_NODES, (NUM_NODES * 10,), generator=gen)
    src = (torch.rand(NUM_NODES * 10, generator=gen) ** 3 * NUM_NODES).long()  # a few hot sources
    graph = gp.CSCGraph.from_coo(src, dst, NUM_NODES)
    features = gp.FeatureStore({"feat": torch.randn(NUM_NODES, DIM, generator=gen)})
    items = gp.ItemSet(torch.arange(NUM_NODES), names="seeds")
    return graph, features, items


def chain(graph, features, items, sampler="NS", hot_reuse=None):
    pipe = gp.ItemSampler(items, 32, shuffle=True, seed=1)
    sample = pipe.sample_neighbor if sampler == "NS" else pipe.sample_layer_neighbor
    return sample(graph, FANOUTS, seed=2, hot_reuse=hot_reuse).fetch_feature(features, ["feat"])


def reuse(graph, features, bottom, ratio=0.1, n=3):
    return gp.HotReuse(bottom, features, "feat", gp.hotness_from_degree(graph), ratio, super_batch=n)


def edges_by_dst(subgraph):
    """{global destination id: sorted global edge ids sampled for it}."""
    src, dst = subgraph.edge_index()
    dst_ids = subgraph.original_column_node_ids[dst]
    out = {}
    for d, e in zip(dst_ids.tolist(), subgraph.original_edge_ids.tolist()):
        out.setdefault(d, []).append(e)
    return {d: sorted(e) for d, e in out.items()}


@pytest.mark.parametrize("sampler", ["NS", "LABOR-0"])
def test_hot_vertices_are_not_expanded_and_cold_ones_are_as_without_reuse(sampler):
    graph, features, items = setup()
    hot_reuse = reuse(graph, features, SAGEConv(DIM, 5), n=10)  # 19 batches: super-batches 0 and 1 read version 0
    plain = list(chain(graph, features, items, sampler))
    reusing = list(chain(graph, features, items, sampler, hot_reuse))
    hot = set(hot_reuse.hot.tolist())
    assert len(hot) == NUM_NODES // 10
    reused_total = 0
    for a, b in zip(plain, reusing):
        for la, lb in zip(a.sampled_subgraphs[1:], b.sampled_subgraphs[1:]):  # upper layers: unchanged
            assert torch.equal(la.original_edge_ids, lb.original_edge_ids)
        bottom_a, bottom_b = a.sampled_subgraphs[0], b.sampled_subgraphs[0]
        dst = bottom_b.original_column_node_ids
        assert torch.equal(dst, bottom_a.original_column_node_ids)
        want, got = edges_by_dst(bottom_a), edges_by_dst(bottom_b)
        num_seeds = a.seeds.numel()
        positions = b.reused.positions.tolist()
        assert positions == [i for i, v in enumerate(dst.tolist()) if v in hot and i >= num_seeds]
        for i, v in enumerate(dst.tolist()):
            if i in set(positions):
                assert v not in got  # a hot vertex: no in-edge sampled
            else:
                assert got.get(v) == want.get(v)  # every cold vertex (and every seed): as without reuse
        assert set(b.input_nodes.tolist()) <= set(a.input_nodes.tolist())
        assert f"reused=ReusedRows(positions=int64[{len(positions)}], rows=float32[{len(positions)}, 5], version=0, " in repr(b)
        assert torch.equal(b.node_features["feat"], features["feat"].read(b.input_nodes))
        reused_total += len(positions)
    assert reused_total > 0
    assert sum(mb.input_nodes.numel() for mb in reusing) < sum(mb.input_nodes.numel() for mb in plain)
    stats = hot_reuse.stats()
    assert stats["rows reused/batch"] == round(reused_total / len(reusing), 1) and stats["edges skipped/batch"] > 0
    skipped_rows = sum(a.input_nodes.numel() - b.input_nodes.numel() for a, b in zip(plain, reusing)) / len(plain)
    assert 0 < skipped_rows * DIM * 4 / 1e6 <= stats["feature MB skipped/batch (at most)"]
    if sampler == "NS":  # NS samples min(in-degree, fanout) in-edges: exactly what was skipped
        skipped_edges = sum(a.sampled_subgraphs[0].num_edges - b.sampled_subgraphs[0].num_edges for a, b in zip(plain, reusing))
        assert stats["edges skipped/batch"] == round(skipped_edges / len(plain), 1)


def test_reused_rows_are_the_bottom_module_over_the_hot_sample_with_the_recorded_weights():
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)
    hot_reuse = reuse(graph, features, bottom, n=2)
    sampler = gp.ItemSampler(items, 32, shuffle=True, seed=1).sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=hot_reuse)
    weights = {0: {k: v.clone() for k, v in bottom.state_dict().items()}}
    for step, mb in enumerate(sampler.fetch_feature(features, ["feat"])):
        s = mb.batch_index // 2
        assert mb.reused.version == max(0, (s - 1) * 2)
        subgraph, input_nodes = sampler.sample_hot_layer(hot_reuse.hot, s)
        reference = SAGEConv(DIM, 5)
        reference.load_state_dict(weights[mb.reused.version])
        with torch.no_grad():
            want = reference(subgraph, features["feat"].read(input_nodes))
        dst = mb.sampled_subgraphs[0].original_column_node_ids
        rows_of_hot = torch.searchsorted(hot_reuse.hot, dst[mb.reused.positions])
        assert torch.allclose(mb.reused.rows, want[rows_of_hot])
        h = torch.zeros(dst.numel(), 5, requires_grad=True)  # the training step's bottom output, then its update
        out = hot_reuse.insert(h, mb)
        assert torch.equal(out[mb.reused.positions], mb.reused.rows)
        out.sum().backward()  # no gradient reaches the replaced rows of h
        assert not h.grad[mb.reused.positions].any()
        with torch.no_grad():
            for p in bottom.parameters():
                p.add_(0.1)
        hot_reuse.push(bottom)
        weights[step + 1] = {k: v.clone() for k, v in bottom.state_dict().items()}
        if step == 8:
            break
    assert step == 8  # the loop ran to its break
    assert hot_reuse.stats()["reused age max"] <= 2 * 2 - 1


def test_a_loop_that_stops_pushing_weights_gets_a_clear_error():
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)
    hot_reuse = gp.HotReuse(bottom, features, "feat", gp.hotness_from_degree(graph), 0.1, super_batch=2, timeout=0.2)
    batches = iter(chain(graph, features, items, hot_reuse=hot_reuse))
    mbs = [next(batches) for _ in range(4)]  # super-batches 0 and 1 read version 0
    with pytest.raises(RuntimeError, match=r"weights after 2 steps, but only 0 were pushed.*reuse.push"):
        next(batches)
    hot_reuse.push(bottom)
    with pytest.raises(RuntimeError, match=r"version 0, 5 steps old \(bound 3\)"):
        for _ in range(4):
            hot_reuse.push(bottom)
        hot_reuse.insert(torch.zeros(mbs[0].sampled_subgraphs[0].num_dst_nodes, 5), mbs[0])


def test_a_new_loader_on_a_trained_reuse_gets_a_clear_error():
    """A HotReuse follows one run: a second DataLoader (a re-run notebook cell) starts again at
    batch 0, whose weights version the pushes since have dropped."""
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)
    hot_reuse = reuse(graph, features, bottom, n=2)
    pipe = chain(graph, features, items, hot_reuse=hot_reuse)
    assert sum(1 for _ in (hot_reuse.push(bottom) for _ in gp.DataLoader(pipe))) == 19
    with pytest.raises(RuntimeError, match=r"super-batch 0 reads the bottom layer's weights after 0 steps, but 19 were "
                                           r"pushed and those are gone: .*Make a new HotReuse"):
        next(iter(gp.DataLoader(pipe)))


def test_a_new_loader_whose_first_weights_are_kept_gets_the_same_cause():
    """A loader rebuilt each epoch over 5 batches: version 0 is still kept, so the second
    loader's batch 0 gets its rows, 5 steps old; insert names the new loader, not a
    missing push (every step was pushed)."""
    graph, features, _ = setup()
    bottom = SAGEConv(DIM, 5)
    hot_reuse = reuse(graph, features, bottom, n=2)
    items = gp.ItemSet(torch.arange(160), names="seeds")
    pipe = gp.ItemSampler(items, 32, shuffle=True, seed=1).sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=hot_reuse)
    for mb in gp.DataLoader(pipe):
        hot_reuse.insert(torch.zeros(mb.sampled_subgraphs[0].num_dst_nodes, 5), mb)
        hot_reuse.push(bottom)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match=r"batch 0 reuses rows of weights version 0, 5 steps old \(bound 3\): 5 steps "
                                                                      r"were pushed, but 0 batches came before it.*a new DataLoader starts "
                                                                      r"again at batch 0: make a new HotReuse"):
        for mb in gp.DataLoader(pipe):
            hot_reuse.insert(torch.zeros(mb.sampled_subgraphs[0].num_dst_nodes, 5), mb)


def test_a_batch_that_reuses_no_row_keeps_its_rows():
    """One layer: the bottom layer's destinations are the seeds, never reused; insert gives
    the module's rows as they are (it raised on the empty reused rows)."""
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)
    hot_reuse = reuse(graph, features, bottom, n=2)
    pipe = gp.ItemSampler(items, 32).sample_neighbor(graph, [3], hot_reuse=hot_reuse).fetch_feature(features, ["feat"])
    batches = 0
    for mb in gp.DataLoader(pipe):
        h = bottom(mb.sampled_subgraphs[0], mb.node_features["feat"])
        assert mb.reused.positions.numel() == 0 and hot_reuse.insert(h, mb) is h
        hot_reuse.push(bottom)
        batches += 1
    assert batches == 19


@pytest.mark.parametrize("hotness", ["degree", "super_batch"])
@pytest.mark.parametrize("sampler", ["NS", "LABOR-0"])
def test_deterministic_through_the_loader_and_resumable(sampler, hotness):
    """Through gp.DataLoader (threads), stopped at batch 7 (the middle of super-batch 2) and
    resumed: the same reused vertices, rows and versions as the uninterrupted run."""
    graph, features, items = setup()
    scores, ratio = (gp.hotness_from_degree(graph), 0.1) if hotness == "degree" else ("super_batch", 0.2)

    def run(state=None, stop=None):
        torch.manual_seed(0)
        bottom = SAGEConv(DIM, 5)
        # A loader left mid-epoch leaves its threads waiting for weights at most `timeout`.
        hot_reuse = gp.HotReuse(bottom, features, "feat", scores, ratio, super_batch=3, timeout=1.0)
        if state is not None:  # a checkpoint: the model, the reuse's versions, the loader's position
            bottom.load_state_dict(state["model"])
            hot_reuse.load_state_dict(state["reuse"])
        loader = gp.DataLoader(chain(graph, features, items, sampler, hot_reuse))
        if state is not None:
            loader.load_state_dict(state["loader"])
        out = []
        for mb in loader:
            dst = mb.sampled_subgraphs[0].original_column_node_ids
            out.append((mb.batch_index, dst[mb.reused.positions], mb.reused.rows, mb.reused.version))
            with torch.no_grad():
                for p in bottom.parameters():
                    p.mul_(0.9)
            hot_reuse.push(bottom)
            if stop is not None and len(out) == stop:
                return out, {"loader": loader.state_dict(), "reuse": hot_reuse.state_dict(), "model": bottom.state_dict()}
        return out, None

    whole, _ = run()
    head, state = run(stop=7)
    tail, _ = run(state)
    assert len(whole) == len(head) + len(tail) == 19
    for (i, p, r, v), (j, q, s, w) in zip(whole, head + tail):
        assert i == j and v == w and torch.equal(p, q) and torch.equal(r, s)
    assert sum(p.numel() for _, p, _, _ in whole) > 0


class CallSized(SAGEConv):
    """SAGEConv plus 1e-3 times the number of rows of the call: its rows show which call
    computed them, as float rounding does in their last bits (a matrix product's blocking
    follows the number of rows)."""

    def forward(self, subgraph, h):
        return super().forward(subgraph, h) + 1e-3 * subgraph.num_dst_nodes


@pytest.mark.parametrize("hotness", ["degree", "super_batch"])
def test_reused_rows_do_not_depend_on_which_batch_comes_first(hotness):
    """A super-batch's rows are one computation, whichever of its batches a loader's thread
    samples first: the batches of super-batch 1 sampled in order and in reverse order reuse
    the same rows, to the bit, and so does the second batch alone (a resumed run's first)."""
    graph, features, items = setup()
    scores, ratio = (gp.hotness_from_degree(graph), 0.1) if hotness == "degree" else ("super_batch", 0.2)

    def sampled(order):
        torch.manual_seed(0)
        hot_reuse = gp.HotReuse(CallSized(DIM, 5), features, "feat", scores, ratio, super_batch=3)
        source = gp.ItemSampler(items, 32, shuffle=True, seed=1)
        sampler = source.sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=hot_reuse)
        batches = list(itertools.islice(source.stream(0), 6))
        return {i: sampler.process(batches[i]).reused for i in order}

    forward, backward, alone = sampled([3, 4, 5]), sampled([5, 4, 3]), sampled([4])
    for i in (3, 4, 5):
        assert torch.equal(forward[i].positions, backward[i].positions) and forward[i].positions.numel() > 0
        assert torch.equal(forward[i].rows, backward[i].rows)
    assert torch.equal(forward[4].rows, alone[4].rows)


class Seeds(gp.Pipe):
    """A source written outside graphpipe: batches of 32 seeds, no ItemSampler to read again."""

    def stream(self, epoch, start=0):
        for i in range(start, 6):
            yield gp.MiniBatch(seeds=torch.arange(32 * i, 32 * i + 32), batch_index=epoch * 6 + i)


def test_without_an_item_sampler_a_super_batch_computes_every_hot_row():
    """With no ItemSampler upstream to find the hot vertices a super-batch reaches, its one
    call computes every hot vertex's row: the module over the whole hot set's sample."""
    graph, features, _ = setup()
    bottom = SAGEConv(DIM, 5)
    hot_reuse = reuse(graph, features, bottom, n=3)
    sampler = Seeds().sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=hot_reuse)
    for mb in sampler.stream(0):
        subgraph, input_nodes = sampler.sample_hot_layer(hot_reuse.hot, mb.batch_index // 3)
        with torch.no_grad():
            want = bottom(subgraph, features["feat"].read(input_nodes))
        dst = mb.sampled_subgraphs[0].original_column_node_ids
        assert torch.equal(mb.reused.rows, want[torch.searchsorted(hot_reuse.hot, dst[mb.reused.positions])])
    assert hot_reuse.stats()["hot rows computed/batch"] == hot_reuse.hot.numel() * 2 / 6
    assert "counting s/batch" not in hot_reuse.stats()


def test_bad_arguments():
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)
    hotness = gp.hotness_from_degree(graph)
    with pytest.raises(TypeError, match="bottom"):
        gp.HotReuse(lambda sg, h: h, features, "feat", hotness, 0.1)
    with pytest.raises(ValueError, match="hot_ratio"):
        gp.HotReuse(bottom, features, "feat", hotness, 1.5)
    with pytest.raises(ValueError, match="hotness"):
        gp.HotReuse(bottom, features, "feat", hotness[None], 0.1)
    for bad, got in ((float("nan"), "2 NaN or infinite scores"), (float("-inf"), "2 NaN or infinite scores")):
        scores = hotness.double()
        scores[[3, 7]] = bad
        with pytest.raises(ValueError, match=f"`hotness` must be finite real scores .*got {got}"):
            gp.HotReuse(bottom, features, "feat", scores, 0.1)
    with pytest.raises(ValueError, match="`hotness` must be finite real scores .*got torch.complex64"):
        gp.HotReuse(bottom, features, "feat", hotness.to(torch.complex64), 0.1)
    short = gp.HotReuse(bottom, features, "feat", hotness[:10], 0.1)
    with pytest.raises(ValueError, match="`hot_reuse` has a hotness score for 10 nodes, but the graph has 600"):
        gp.ItemSampler(items, 8).sample_neighbor(graph, FANOUTS, hot_reuse=short)
    with pytest.raises(KeyError, match="`hot_reuse` reads node feature 'x' of type None, which the store lacks"):
        gp.ItemSampler(items, 8).sample_neighbor(graph, FANOUTS, hot_reuse=gp.HotReuse(bottom, features, "x", hotness, 0.1))
    cached = gp.gpu_cached_feature(features, "feat", max_bytes=1 << 10, device="cpu")  # one reader at a time
    with pytest.raises(ValueError, match=r"`hot_reuse` reads node feature 'feat' from the sampler's threads .*\(a GPU cache\)"):
        gp.ItemSampler(items, 8).sample_neighbor(graph, FANOUTS, hot_reuse=gp.HotReuse(bottom, cached, "feat", hotness, 0.1))
    hot_reuse = gp.HotReuse(bottom, features, "feat", hotness, 0.1)
    with pytest.raises(gp.UnsupportedCombination, match="hot-vertex reuse samples independent block batches"):
        gp.ItemSampler(items, 8).sample_neighbor(graph, FANOUTS, layout="pyg", hot_reuse=hot_reuse)
    for k in (1, 2):  # LABOR-k draws a layer's vertices jointly: a cold vertex's sample would change
        with pytest.raises(gp.UnsupportedCombination, match=f"LABOR with importance_sampling={k} draws a layer's vertices jointly"):
            gp.ItemSampler(items, 8).sample_layer_neighbor(graph, FANOUTS, importance_sampling=k, hot_reuse=hot_reuse)
    gp.ItemSampler(items, 8).sample_layer_neighbor(graph, FANOUTS, hot_reuse=hot_reuse)  # LABOR-0 samples each on its own
    with pytest.raises(TypeError, match="hot_reuse"):
        gp.ItemSampler(items, 8).sample_neighbor(graph, FANOUTS, hot_reuse=0.1)
    on_gpu = gp.ItemSampler(items, 8)
    on_gpu.device = torch.device("cuda")  # what copy_to('cuda') upstream declares where CUDA is
    with pytest.raises(gp.UnsupportedCombination, match=r"hot-vertex reuse samples on the CPU.*copy_to\('cuda'\) after it"):
        on_gpu.sample_neighbor(graph, FANOUTS, hot_reuse=hot_reuse)


def test_push_takes_the_bottom_layer_it_was_built_with():
    """push refuses another type or other parameter names or shapes (torch's raw state_dict
    error came later, in a loader thread); the version stays."""
    graph, features, _ = setup()
    hot_reuse = reuse(graph, features, SAGEConv(DIM, 5), n=1)
    with pytest.raises(TypeError, match=r"HotReuse.push: `bottom` must be the bottom layer HotReuse was built with, a SAGEConv, got NoneType"):
        hot_reuse.push(None)
    with pytest.raises(TypeError, match="a SAGEConv, got Linear"):
        hot_reuse.push(torch.nn.Linear(DIM, 5))
    with pytest.raises(ValueError, match=r"got a SAGEConv whose parameters differ: lin_neigh.weight \(7, 8\) \(built with \(5, 8\)\), "
                                         r"lin_self.bias \(7,\) \(built with \(5,\)\)"):
        hot_reuse.push(SAGEConv(DIM, 7))
    assert hot_reuse.version == 0
    hot_reuse.push(SAGEConv(DIM, 5))  # the same shapes: accepted (which instance cannot be told)
    assert hot_reuse.version == 1


def test_load_state_dict_takes_a_state_of_the_same_bottom_layer_and_super_batch():
    """load_state_dict checks what push checks (torch's raw state_dict error came later, in a
    loader thread), the version, and the kept versions (multiples of super_batch, the one the
    next batches read included); a refused state changes nothing."""
    graph, features, _ = setup()
    hot_reuse = reuse(graph, features, SAGEConv(DIM, 5), n=2)
    before = hot_reuse.state_dict()

    def trained(out_dim, n, steps):
        other = reuse(graph, features, SAGEConv(DIM, out_dim), n=n)
        for _ in range(steps):
            other.push(SAGEConv(DIM, out_dim))
        return other.state_dict()

    where = "HotReuse.load_state_dict: "
    bad = [
        ({}, r"`state` must have the keys \['options', 'version', 'weights'\] \(a HotReuse.state_dict\(\)\), got \[\]"),
        ({**before, "version": -1}, r"`state\['version'\]` must be an int >= 0, got -1"),
        (trained(7, 2, 5), r"state\['weights'\]\[\d\] is not the bottom layer HotReuse was built with: lin_neigh.weight \(7, 8\) \(built with \(5, 8\)\)"),
        ({**before, "weights": {0: {}}}, r"state\['weights'\]\[0\] is not .*: lin_neigh.weight missing \(built with \(5, 8\)\)"),
        ({**before, "version": 7, "weights": {3: before["weights"][0]}},
         r"state\['weights'\] has version 3, not a multiple of super_batch=2 \(a state of a HotReuse with another super_batch\?\)"),
        ({**before, "weights": {**before["weights"], 4: before["weights"][0]}}, r"state\['weights'\] has version 4, not an int in \[0, state\['version'\] = 0\]"),
        ({**before, "version": 9}, r"state\['weights'\] lacks version 6, which the batches after 9 steps reuse \(it has \[0\]\)"),
    ]
    for state, message in bad:
        with pytest.raises(ValueError, match=where + message):
            hot_reuse.load_state_dict(state)
        assert hot_reuse.version == 0 and list(hot_reuse.state_dict()["weights"]) == [0]
    with pytest.raises(TypeError, match=r"`state` must be a dict from HotReuse.state_dict\(\), got list"):
        hot_reuse.load_state_dict([])
    with pytest.raises(TypeError, match=r"state\['weights'\] must be a dict \{version: the bottom layer's state_dict\}, got NoneType"):
        hot_reuse.load_state_dict({**before, "weights": None})
    good = trained(5, 2, 7)
    hot_reuse.load_state_dict(good)
    assert hot_reuse.version == 7 and sorted(hot_reuse.state_dict()["weights"]) == [2, 4, 6]


def test_load_state_dict_refuses_the_state_of_another_hot_set():
    """A state names its HotReuse's hot set (a SHA-256 of the hot ids), hot ratio and
    super_batch: other scores at the same ratio, another ratio or super_batch, or a counted
    hot set are refused; a state saved before it named them loads with a warning."""
    graph, features, _ = setup()
    bottom = SAGEConv(DIM, 5)
    degree = gp.hotness_from_degree(graph)
    saved = gp.HotReuse(bottom, features, "feat", degree, 0.1, super_batch=2)
    saved.push(bottom)
    state = saved.state_dict()
    assert state["options"]["super_batch"] == 2 and state["options"]["hot_ratio"] == 0.1
    assert re.fullmatch(r"60 vertices, sha256 [0-9a-f]{16}", state["options"]["hot"])
    others = {
        "other scores, same ratio": (gp.HotReuse(bottom, features, "feat", torch.arange(NUM_NODES).float(), 0.1, super_batch=2),
                                     r"hot '60 vertices, sha256 [0-9a-f]{16}' \(this one's '60 vertices, sha256 [0-9a-f]{16}'\)"),
        "another ratio": (gp.HotReuse(bottom, features, "feat", degree, 0.2, super_batch=2), r"hot_ratio 0.1 \(this one's 0.2\); hot '60 "),
        "another super_batch": (gp.HotReuse(bottom, features, "feat", degree, 0.1, super_batch=3), r"super_batch 2 \(this one's 3\)\)"),
        "counted": (gp.HotReuse(bottom, features, "feat", "super_batch", 0.1, super_batch=2), r"hot '60 vertices, .*' \(this one's 'super_batch'\)"),
    }
    for name, (other, message) in others.items():
        with pytest.raises(ValueError, match=r"HotReuse.load_state_dict: the state is from another HotReuse \(.*" + message):
            other.load_state_dict(state)
        assert other.version == 0, name
    again = gp.HotReuse(bottom, features, "feat", degree, 0.1, super_batch=2)
    again.load_state_dict(state)
    assert again.version == 1
    old = {k: v for k, v in state.items() if k != "options"}
    with pytest.raises(ValueError, match=r"`state` must have the keys \['options', 'version', 'weights'\]"):
        others["other scores, same ratio"][0].load_state_dict(old)


def test_one_sampler_uses_a_hot_reuse():
    """A second sampler (an evaluation chain) is refused when it is built; the loader's
    copies of the first (placements) and its own runs are not."""
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)
    hot_reuse = reuse(graph, features, bottom, n=2)
    pipe = chain(graph, features, items, hot_reuse=hot_reuse)
    with pytest.raises(ValueError, match=r"LayerNeighborSampler: `hot_reuse` is already used by another NeighborSampler \(still "
                                         r"referenced.*\); one sampler uses a HotReuse .*make a HotReuse per sampler"):
        gp.ItemSampler(items, 8).sample_layer_neighbor(graph, [2, 2], hot_reuse=hot_reuse)
    loader = gp.DataLoader(pipe, transforms=[thread_pool(gp.NeighborSampler, 2)])
    batches = 0
    for mb in loader:
        hot_reuse.insert(torch.zeros(mb.sampled_subgraphs[0].num_dst_nodes, 5), mb)
        hot_reuse.push(bottom)
        batches += 1
    assert batches == 19 and "hot reuse" in loader.explain()


@pytest.mark.parametrize("sampler", ["NS", "LABOR"])
def test_a_sampler_that_raises_claims_no_hot_reuse(sampler):
    """A build refused for its own options (here `weights` naming no edge attribute) does not
    claim the HotReuse, though the traceback keeps the half-built sampler: the corrected
    build gets it."""
    graph, features, items = setup()
    hot_reuse = reuse(graph, features, SAGEConv(DIM, 5), n=2)
    items_sampler = gp.ItemSampler(items, 8)
    sample = items_sampler.sample_neighbor if sampler == "NS" else items_sampler.sample_layer_neighbor
    with pytest.raises(KeyError, match="weights") as raised:
        sample(graph, [2, 2], weights="missing", hot_reuse=hot_reuse)
    assert any(type(frame.frame.f_locals.get("self")).__name__.endswith("NeighborSampler") for frame in raised.traceback)
    assert sample(graph, [2, 2], hot_reuse=hot_reuse).hot_reuse is hot_reuse


def test_a_pyg_conv_as_the_bottom_layer():
    """``call=HotReuse.pyg_style``: the reused rows are the conv over the hot sample's
    ``(x, x_dst)`` and ``edge_index``, and insert works on the conv's output."""
    nn = pytest.importorskip("torch_geometric.nn")
    graph, features, items = setup()
    conv = nn.SAGEConv(DIM, 5)
    hot_reuse = gp.HotReuse(conv, features, "feat", gp.hotness_from_degree(graph), 0.1, super_batch=10, call=gp.HotReuse.pyg_style)
    sampler = gp.ItemSampler(items, 32, seed=1).sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=hot_reuse)
    mb = next(iter(sampler.fetch_feature(features, ["feat"])))
    subgraph, input_nodes = sampler.sample_hot_layer(hot_reuse.hot, 0)
    src, dst = subgraph.edge_index()
    x = features["feat"].read(input_nodes)
    with torch.no_grad():
        want = conv((x, x[: subgraph.num_dst_nodes]), torch.stack([src, dst]))
    bottom = mb.sampled_subgraphs[0]
    assert torch.allclose(mb.reused.rows, want[torch.searchsorted(hot_reuse.hot, bottom.original_column_node_ids[mb.reused.positions])])
    b_src, b_dst = bottom.edge_index()
    h = conv((mb.node_features["feat"], mb.node_features["feat"][: bottom.num_dst_nodes]), torch.stack([b_src, b_dst]))
    assert torch.equal(hot_reuse.insert(h, mb)[mb.reused.positions], mb.reused.rows)


def test_the_gradient_sent_to_reused_rows_reaches_the_bottom_layer_after_its_super_batch():
    """What the batches of a super-batch send to its reused rows is backpropagated, once the
    super-batch is trained, through the bottom layer with the weights that computed them; the
    weights' gradient joins the next step's."""
    graph, features, items = setup()
    torch.manual_seed(0)
    bottom = SAGEConv(DIM, 5)
    version0 = {k: v.clone() for k, v in bottom.state_dict().items()}
    hot_reuse = reuse(graph, features, bottom, n=1)
    sampler = gp.ItemSampler(items, 32, seed=1).sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=hot_reuse)
    mb = next(iter(sampler.fetch_feature(features, ["feat"])))
    h = torch.zeros(mb.sampled_subgraphs[0].num_dst_nodes, 5, requires_grad=True)
    weight = torch.randn(5)
    (hot_reuse.insert(h, mb) * weight).sum().backward()  # each reused row gets gradient `weight`
    with torch.no_grad():
        for p in bottom.parameters():
            p.add_(1.0)  # the optimizer step
    hot_reuse.push(bottom)  # super-batch 0 is trained: its rows' gradient goes back through version 0
    reference = SAGEConv(DIM, 5)
    reference.load_state_dict(version0)
    subgraph, input_nodes = sampler.sample_hot_layer(hot_reuse.hot, 0)
    dst = mb.sampled_subgraphs[0].original_column_node_ids
    rows_of_hot = torch.searchsorted(hot_reuse.hot, dst[mb.reused.positions])
    (reference(subgraph, features["feat"].read(input_nodes))[rows_of_hot] * weight).sum().backward()
    x = torch.randn(3, DIM)
    bottom.zero_grad()
    bottom.lin_self(x).sum().backward()  # the next step's own gradient, plus the pending one
    assert torch.allclose(bottom.lin_self.weight.grad, torch.ones(5, 1) * x.sum(0) + reference.lin_self.weight.grad, atol=1e-5)
    assert bottom.lin_neigh.weight.grad is None  # its pending gradient waits for its own next backward
    bottom.lin_neigh(x).sum().backward()
    assert torch.allclose(bottom.lin_neigh.weight.grad, torch.ones(5, 1) * x.sum(0) + reference.lin_neigh.weight.grad, atol=1e-5)


class TypedMean(torch.nn.Module):
    """An R-GCN-like bottom layer over a typed block: per destination type, a linear map of
    its own row plus the mean of its in-neighbours' rows over every edge type."""

    def __init__(self, types, in_dim, out_dim):
        super().__init__()
        self.own = torch.nn.ModuleDict({t: torch.nn.Linear(in_dim, out_dim) for t in types})
        self.neighbours = torch.nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, subgraph, x):
        out = {}
        for t, dst_ids in subgraph.original_column_node_ids.items():
            n = dst_ids.numel()
            total, count = torch.zeros(n, DIM), torch.zeros(n)
            for etype, csc in subgraph.sampled_csc.items():
                src_type, _, dst_type = etype.split(":")
                if dst_type == t:
                    dst = torch.repeat_interleave(torch.arange(n), csc.indptr.diff())
                    total = total.index_add(0, dst, x[src_type][csc.indices])
                    count = count.index_add(0, dst, torch.ones(dst.numel()))
            out[t] = self.own[t](x[t][:n]) + self.neighbours(total / count.clamp(min=1)[:, None])
        return out


def typed_edges_by_dst(subgraph):
    """{(edge type, type-local destination id): sorted edge ids sampled for it}."""
    out = {}
    for etype, csc in subgraph.sampled_csc.items():
        dst_type = etype.split(":")[2]
        dst = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
        ids = subgraph.original_column_node_ids[dst_type][dst]
        for d, e in zip(ids.tolist(), subgraph.original_edge_ids[etype].tolist()):
            out.setdefault((etype, d), []).append(e)
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("sampler", ["NS", "LABOR-0"])
def test_typed_graphs(sampler):
    """On a typed graph: hot destinations (global ids) are not expanded in the bottom layer,
    every other is as without reuse; the reused rows are the typed bottom module's over the
    hot sample; insert takes and gives rows by node type."""
    from hetero_graphs import NUM_NODES, hetero_graph

    graph, _ = hetero_graph()
    gen = torch.Generator().manual_seed(3)
    features = gp.FeatureStore({(t, "feat"): torch.randn(n, DIM, generator=gen) for t, n in NUM_NODES.items()})
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(40), names="seeds"), "author": gp.ItemSet(torch.arange(30), names="seeds")})
    bottom = TypedMean(graph.node_types, DIM, 5)
    hot_reuse = gp.HotReuse(bottom, features, "feat", gp.hotness_from_degree(graph), 0.2, super_batch=50)

    def pipe(reuse=None):
        source = gp.ItemSampler(items, 8, shuffle=True, seed=1)
        sample = source.sample_neighbor if sampler == "NS" else source.sample_layer_neighbor
        return sample(graph, FANOUTS, seed=2, hot_reuse=reuse)

    offsets = dict(zip(graph.node_types, graph.node_type_offset.tolist()))
    hot = set(hot_reuse.hot.tolist())
    reusing = pipe(hot_reuse)
    reused = 0
    for a, b in zip(pipe(), reusing):
        want, got = typed_edges_by_dst(a.sampled_subgraphs[0]), typed_edges_by_dst(b.sampled_subgraphs[0])
        dst = b.sampled_subgraphs[0].original_column_node_ids
        type_major = torch.cat([dst[t] + offsets[t] for t in graph.node_types])
        hot_positions = set(b.reused.positions.tolist())
        assert {type_major[i].item() for i in hot_positions} <= hot
        for (etype, d), edges in want.items():
            global_id = d + offsets[etype.split(":")[2]]
            if global_id in hot and (etype, d) not in got:
                continue  # a hot destination: not expanded
            assert got[(etype, d)] == edges
        for (etype, d) in got:
            assert d + offsets[etype.split(":")[2]] not in {type_major[i].item() for i in hot_positions}
        subgraph, input_nodes = reusing.sample_hot_layer(hot_reuse.hot, b.batch_index // 50)
        with torch.no_grad():
            out = bottom(subgraph, {t: features["node", t, "feat"].read(ids) for t, ids in input_nodes.items()})
        stacked = torch.cat([out[t] for t in graph.node_types if t in out and out[t].numel()])
        assert torch.allclose(b.reused.rows, stacked[torch.searchsorted(hot_reuse.hot, type_major[b.reused.positions])])
        h = {t: torch.zeros(ids.numel(), 5) for t, ids in dst.items()}
        inserted = torch.cat([hot_reuse.insert(h, b)[t] for t in graph.node_types])
        assert torch.equal(inserted[b.reused.positions], b.reused.rows)
        reused += len(hot_positions)
    assert reused > 0


class HeteroMean(torch.nn.Module):
    """A bottom layer over a typed block as DGL's HeteroGraphConv: rows only for the
    destination types with sampled in-edges (the mean of their in-neighbours plus their own)."""

    def __init__(self, in_dim, out_dim):
        super().__init__()
        self.lin = torch.nn.Linear(in_dim, out_dim)

    def forward(self, subgraph, x):
        sums = {}
        for etype, csc in subgraph.sampled_csc.items():
            src_type, _, dst_type = etype.split(":")
            if csc.indices.numel() == 0:
                continue
            n = csc.indptr.numel() - 1
            dst = torch.repeat_interleave(torch.arange(n), csc.indptr.diff())
            total, count = sums.get(dst_type, (torch.zeros(n, x[src_type].shape[1]), torch.zeros(n)))
            sums[dst_type] = (total.index_add(0, dst, x[src_type][csc.indices]), count.index_add(0, dst, torch.ones(dst.numel())))
        return {t: self.lin(total / count.clamp(min=1)[:, None] + x[t][: count.numel()]) for t, (total, count) in sums.items()}


def authors_and_papers(cited_by_authors):
    """A typed graph (authors write papers, papers cite papers; with ``cited_by_authors``
    papers also name their authors), its features and the papers as seeds."""
    gen = torch.Generator().manual_seed(0)
    num_nodes = {"author": 40, "paper": 200}
    edges = {"author:writes:paper": torch.stack([torch.randint(40, (60,), generator=gen), torch.randint(200, (60,), generator=gen)]),
             "paper:cites:paper": torch.stack([(torch.rand(1500, generator=gen) ** 3 * 200).long(), torch.randint(200, (1500,), generator=gen)])}
    if cited_by_authors:
        edges["paper:written_by:author"] = edges["author:writes:paper"].flip(0)
    graph = gp.CSCGraph.from_hetero_edges(edges, num_nodes)
    features = gp.FeatureStore({(t, "feat"): torch.randn(n, 4, generator=gen) for t, n in num_nodes.items()})
    return graph, features, gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(200), names="seeds")})


@pytest.mark.parametrize("hot_type", ["paper", "author"])
def test_typed_insert_when_the_module_gives_no_rows_for_a_type(hot_type):
    """A bottom module that gives no rows for a destination type without sampled in-edges
    (DGL's HeteroGraphConv): insert still puts each reused row at its own destination (the
    positions count every type). paper: the authors (no in-edge type) come first and are
    left out; author: every author is hot, so a batch's author destinations get no in-edges
    and insert adds their rows. A type left out with only some reused rows is refused, as is
    a type with another row count."""
    graph, features, items = authors_and_papers(cited_by_authors=hot_type == "author")
    offsets = dict(zip(graph.node_types, graph.node_type_offset.tolist()))
    hotness = graph.indptr.diff().float()  # in-degree: the most cited papers
    if hot_type == "author":
        hotness[: offsets["paper"]] = 1e6
    bottom = HeteroMean(4, 3)
    ratio = 0.1 if hot_type == "paper" else offsets["paper"] / graph.total_num_nodes
    hot_reuse = gp.HotReuse(bottom, features, "feat", hotness, ratio, super_batch=100)
    pipe = gp.ItemSampler(items, 16, seed=1).sample_neighbor(graph, [3, 3], seed=2, hot_reuse=hot_reuse)
    checked = 0
    for mb in pipe:
        subgraph = mb.sampled_subgraphs[0]
        counts = {t: subgraph.num_dst_nodes.get(t, 0) for t in graph.node_types}
        h = bottom(subgraph, {t: features["node", t, "feat"].read(ids) for t, ids in mb.input_nodes.items()})
        full = torch.cat([h[t] if t in h else torch.full((counts[t], 3), float("nan")) for t in graph.node_types])
        full[mb.reused.positions] = mb.reused.rows
        want = dict(zip(graph.node_types, full.split(list(counts.values()))))
        out = hot_reuse.insert(h, mb)
        assert set(out) == {t for t in graph.node_types if t in h or (counts[t] and not want[t].isnan().any())}
        for t in out:
            assert torch.equal(out[t], want[t])
        left_out = [t for t in graph.node_types if t not in h and counts[t]]
        checked += bool(left_out) and mb.reused.positions.numel() > 0
        if hot_type == "author" and counts["author"]:
            assert "author" in out and "author" not in h  # every author destination reused, none expanded
        partly = [t for t in h if 0 < int(torch.isin(mb.reused.positions, torch.arange(counts[t]) + sum(
            counts[u] for u in graph.node_types[: graph.node_types.index(t)])).sum()) < counts[t]]
        for t in partly:
            with pytest.raises(ValueError, match=rf"`h` has no rows for node type '{t}', but batch {mb.batch_index} reuses rows for"):
                hot_reuse.insert({u: r for u, r in h.items() if u != t}, mb)
            with pytest.raises(ValueError, match=rf"`h\['{t}'\]` must have a row per '{t}' destination .*got {counts[t] - 1}"):
                hot_reuse.insert({**h, t: h[t][1:]}, mb)
    assert checked > 0


def test_typed_hotness_from_presampling_is_by_global_id():
    """gp.hotness_from_presampling over a typed chain (no node_type) scores global ids, as
    HotReuse reads them: its hot set is the most fetched input nodes of every type."""
    from hetero_graphs import NUM_NODES, hetero_graph

    graph, _ = hetero_graph()
    features = gp.FeatureStore({(t, "feat"): torch.randn(n, DIM) for t, n in NUM_NODES.items()})
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(40), names="seeds"), "author": gp.ItemSet(torch.arange(30), names="seeds")})
    plain = gp.ItemSampler(items, 8, shuffle=True, seed=1).sample_neighbor(graph, FANOUTS, seed=2)
    offsets = dict(zip(graph.node_types, graph.node_type_offset.tolist()))
    counts = {}
    for mb in itertools.islice(plain.stream(0), 4):  # by hand, global ids
        for t, ids in mb.input_nodes.items():
            for i in ids.tolist():
                counts[offsets[t] + i] = counts.get(offsets[t] + i, 0) + 1
    hotness = gp.hotness_from_presampling(plain, graph.total_num_nodes, num_batches=4)
    hot_reuse = gp.HotReuse(TypedMean(graph.node_types, DIM, 5), features, "feat", hotness, 0.05)
    top = sorted(counts.values(), reverse=True)[hot_reuse.hot.numel() - 1]
    assert {v for v, c in counts.items() if c > top} <= set(hot_reuse.hot.tolist())
    assert all(counts.get(v, 0) >= top for v in hot_reuse.hot.tolist())
    gp.ItemSampler(items, 8).sample_neighbor(graph, FANOUTS, hot_reuse=hot_reuse)  # its size is the graph's


@pytest.mark.parametrize("bottom_fanouts", [[2, 0, 3, 1], [1, 5, 1, 4], [-1, 2, 0, -1]])
def test_typed_skipped_edges_are_what_ns_would_have_sampled(bottom_fanouts):
    """``edges skipped/batch`` on a typed graph with a fanout per edge type (0 included) is
    exactly the bottom layer's edges that sampling without reuse has more (it capped each
    hot vertex's whole in-degree by the sum of the fanouts)."""
    from hetero_graphs import EDGE_TYPES, NUM_NODES, hetero_graph

    graph, _ = hetero_graph()
    features = gp.FeatureStore({(t, "feat"): torch.randn(n, DIM) for t, n in NUM_NODES.items()})
    items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(40), names="seeds"), "author": gp.ItemSet(torch.arange(30), names="seeds")})
    fanouts = [dict(zip(EDGE_TYPES, bottom_fanouts)), 3]
    hot_reuse = gp.HotReuse(TypedMean(graph.node_types, DIM, 5), features, "feat", gp.hotness_from_degree(graph), 0.2, super_batch=50)

    def pipe(reuse=None):
        return gp.ItemSampler(items, 8, shuffle=True, seed=1).sample_neighbor(graph, fanouts, seed=2, hot_reuse=reuse)

    plain, reusing = list(pipe()), list(pipe(hot_reuse))
    assert len(plain) == len(reusing) == 9
    skipped = sum(sum(a.sampled_subgraphs[0].num_edges.values()) - sum(b.sampled_subgraphs[0].num_edges.values()) for a, b in zip(plain, reusing))
    assert skipped > 0 and hot_reuse.stats()["edges skipped/batch"] == round(skipped / 9, 1)


def global_bottom(mb, offsets):
    """A batch's bottom-layer destinations (type-major global ids), its seeds' global ids,
    and {global destination: sorted (edge type, edge id) sampled for it}."""
    bottom = mb.sampled_subgraphs[0]
    if offsets is None:
        edges = {d: [(None, e) for e in es] for d, es in edges_by_dst(bottom).items()}
        return bottom.original_column_node_ids, set(mb.seeds.tolist()), edges
    dst = torch.cat([bottom.original_column_node_ids[t] + offset for t, offset in offsets.items()])
    seeds = {v + offsets[t] for t, ids in mb.seeds.items() for v in ids.tolist()}
    edges = {}
    for (etype, d), es in typed_edges_by_dst(bottom).items():
        edges.setdefault(d + offsets[etype.split(":")[2]], []).extend((etype, e) for e in es)
    return dst, seeds, {d: sorted(es) for d, es in edges.items()}


def counted_chain(kind):
    """(features, pipe(hot_reuse), its bottom module, n, node type offsets) for the
    counted hot set on an untyped graph, a typed one, or a DistributedItemSampler's rank."""
    if kind == "typed":
        from hetero_graphs import NUM_NODES as TYPED_NODES, hetero_graph

        graph, _ = hetero_graph()
        gen = torch.Generator().manual_seed(3)
        features = gp.FeatureStore({(t, "feat"): torch.randn(n, DIM, generator=gen) for t, n in TYPED_NODES.items()})
        items = gp.HeteroItemSet({"paper": gp.ItemSet(torch.arange(40), names="seeds"), "author": gp.ItemSet(torch.arange(30), names="seeds")})
        bottom, n, batch_size = TypedMean(graph.node_types, DIM, 5), 2, 8
        offsets = dict(zip(graph.node_types, graph.node_type_offset.tolist()))
    else:
        graph, features, items = setup()
        if kind == "distributed":  # rank 1 of 2: its share of each global batch; none of the last (1 item)
            items = gp.ItemSet(torch.arange(9 * 64 + 1), names="seeds")
        bottom, n, batch_size, offsets = SAGEConv(DIM, 5), 3, 32, None

    def pipe(reuse=None):
        if kind == "distributed":
            source = gp.DistributedItemSampler(items, batch_size, rank=1, world_size=2, shuffle=True, seed=1)
        else:
            source = gp.ItemSampler(items, batch_size, shuffle=True, seed=1)
        return source.sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=reuse)

    return features, pipe, bottom, n, offsets


@pytest.mark.parametrize("kind", ["untyped", "typed", "distributed"])
def test_counted_hot_sets_are_the_most_accessed_vertices_of_each_super_batch(kind):
    """hotness="super_batch": super-batch s's hot set is the floor(ratio * R) vertices that
    most of its n batches reach as non-seed bottom-layer destinations (R: those reached at
    all; ties to the lower id), counted by brute force over the batches sampled without
    reuse; hot vertices are not expanded, every other is as without reuse. Super-batches
    cross the epoch boundary; they group the batches this process trains (the distributed
    rank trains 9 of each epoch's 10 global batches)."""
    features, pipe, bottom, n, offsets = counted_chain(kind)
    ratio = 0.3
    plain_pipe = pipe()
    per_epoch, own = plain_pipe.source.num_global_batches, len(plain_pipe.source)

    def ordinal(batch_index):  # its position among the batches this process trains
        return batch_index // per_epoch * own + batch_index % per_epoch

    def super_of(batch_index):
        return ordinal(batch_index) // n

    start = (len(plain_pipe.source) // n - 1) * n  # the last super-batches of epoch 0, the first of epoch 1
    plain = list(plain_pipe.stream(0, start)) + list(itertools.islice(plain_pipe.stream(1), 3 * n))
    hot_reuse = gp.HotReuse(bottom, features, "feat", "super_batch", ratio, super_batch=n)
    for _ in range(start):
        hot_reuse.push(bottom)
    reusing = pipe(hot_reuse)
    assert reusing.label().endswith(f"(hot reuse: 30.0% of each super-batch's vertices hot, by counts, super-batch {n})")
    reused_by_super, b = {}, -1
    for b, mb in enumerate(itertools.chain(reusing.stream(0, start), itertools.islice(reusing.stream(1), 2 * n))):
        a = plain[b]
        assert a.batch_index == mb.batch_index
        s = super_of(mb.batch_index)
        counts = {}
        for other in [p for p in plain if super_of(p.batch_index) == s]:  # brute force over the super-batch's batches
            dst, seeds, _ = global_bottom(other, offsets)
            for v in set(dst.tolist()) - seeds:
                counts[v] = counts.get(v, 0) + 1
        want = set(sorted(counts, key=lambda v: (-counts[v], v))[: int(ratio * len(counts))])
        dst, seeds, got_edges = global_bottom(mb, offsets)
        plain_dst, _, want_edges = global_bottom(a, offsets)
        assert torch.equal(dst, plain_dst)
        positions = mb.reused.positions.tolist()
        assert positions == [i for i, v in enumerate(dst.tolist()) if v in want and v not in seeds]
        for i, v in enumerate(dst.tolist()):
            assert got_edges.get(v) == (None if i in positions else want_edges.get(v))
        reused_by_super.setdefault(s, (want, set()))[1].update(dst[positions].tolist())
        hot_reuse.push(bottom)
    assert len(plain) == own - start + 3 * n and b + 1 == own - start + 2 * n  # every batch was checked
    for s, (want, reused) in reused_by_super.items():
        if (s + 1) * n <= ordinal(mb.batch_index) + 1:  # a whole super-batch ran: each hot vertex was reused by one of its batches
            assert reused == want and want
    stats = hot_reuse.stats()
    assert stats["hot vertices/super-batch"] > 0 and stats["counting s/batch"] > 0


def test_counted_hot_sets_bad_arguments():
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)
    with pytest.raises(ValueError, match=r"`hotness` must be .* or 'super_batch' .*got 'super-batch'"):
        gp.HotReuse(bottom, features, "feat", "super-batch", 0.1)
    counted = gp.HotReuse(bottom, features, "feat", "super_batch", 0.1)
    assert "10.0% of each super-batch's" in repr(counted)
    with pytest.raises(KeyError, match="`hot_reuse` reads node feature 'x'"):
        gp.ItemSampler(items, 8).sample_neighbor(graph, FANOUTS, hot_reuse=gp.HotReuse(bottom, features, "x", "super_batch", 0.1))
    batches = [gp.MiniBatch(seeds=torch.arange(8), batch_index=0)]
    with pytest.raises(ValueError, match="hotness='super_batch' reads each super-batch's batches again from the ItemSampler"):
        gp.NeighborSampler(batches, graph, FANOUTS, hot_reuse=counted)


@pytest.mark.parametrize("hotness", ["degree", "super_batch"])
@pytest.mark.parametrize("drop_uneven_inputs", [False, True])
def test_a_rank_that_skips_the_last_global_batch_keeps_its_versions(hotness, drop_uneven_inputs):
    """Rank 1 of 2 gets no item of the last global batch (577 items, 64 a global batch): it
    trains 9 batches an epoch of 10 batch indices. Versions follow the steps it trains, not
    ``batch_index``: over 4 epochs every batch reuses the rows of version max(0, (s - 1) n),
    s = its ordinal // n, and the loop that pushes after every step never waits."""
    graph, features, _ = setup()
    items = gp.ItemSet(torch.arange(9 * 64 + 1), names="seeds")
    bottom, n = SAGEConv(DIM, 5), 2
    scores = gp.hotness_from_degree(graph) if hotness == "degree" else "super_batch"
    reuse = gp.HotReuse(bottom, features, "feat", scores, 0.2, super_batch=n, timeout=3.0)
    source = gp.DistributedItemSampler(items, 32, rank=1, world_size=2, shuffle=True, seed=1, drop_uneven_inputs=drop_uneven_inputs)
    loader = gp.DataLoader(source.sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=reuse))
    ordinal = 0
    for epoch in range(4):
        indices = []
        for mb in loader:
            assert mb.reused.version == max(0, (ordinal // n - 1) * n)
            reuse.insert(torch.zeros(mb.sampled_subgraphs[0].num_dst_nodes, 5), mb)
            reuse.push(bottom)
            indices.append(mb.batch_index)
            ordinal += 1
        assert indices == list(range(10 * epoch, 10 * epoch + 9))
    assert reuse.version == 36


def test_a_loader_state_names_the_hot_set():
    """Found in review: a loader state resumed silently in a pipe reusing another hot set."""
    graph, features, items = setup()
    bottom = SAGEConv(DIM, 5)

    def loader(hotness):
        reuse = gp.HotReuse(bottom, features, "feat", hotness, 0.1, super_batch=2)
        return gp.DataLoader(gp.ItemSampler(items, 32, shuffle=True, seed=1).sample_neighbor(graph, FANOUTS, seed=2, hot_reuse=reuse))

    state = loader(gp.hotness_from_degree(graph)).state_dict()
    with pytest.raises(ValueError, match=r"options: NeighborSampler hot_reuse: the state has .*'hot': '60 vertices, sha256"):
        loader(torch.arange(NUM_NODES).float()).load_state_dict(state)
    loader(gp.hotness_from_degree(graph)).load_state_dict(state)


def test_to_pyg_refuses_a_batch_with_reused_rows():
    """Found in review: to_pyg() of a reuse batch gave its hot nodes no in-edges and their
    rows nowhere: a PyG model silently computed them from no neighbours."""
    pytest.importorskip("torch_geometric")
    graph, features, items = setup()
    reuse = gp.HotReuse(SAGEConv(DIM, 5), features, "feat", gp.hotness_from_degree(graph), 0.2, super_batch=2)
    batch = next(iter(chain(graph, features, items, hot_reuse=reuse)))
    assert batch.reused.positions.numel() > 0
    with pytest.raises(ValueError, match=r"MiniBatch.to_pyg\(\): the batch reuses hot vertices' rows \(hot_reuse\)"):
        batch.to_pyg()


def test_a_bottom_call_that_raised_is_made_again_by_the_next_batch():
    """Found in review: the super-batch's hot set was kept before its rows were computed, so
    after one interrupted call the next batch of the super-batch failed with an IndexError."""
    graph, features, items = setup()
    calls = []

    def call(module, subgraph, h):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("interrupted")
        return module(subgraph, h)

    reuse = gp.HotReuse(SAGEConv(DIM, 5), features, "feat", gp.hotness_from_degree(graph), 0.1, super_batch=3, call=call)
    pipe = chain(graph, features, items, hot_reuse=reuse)
    with pytest.raises(RuntimeError, match="interrupted"):
        next(pipe.stream(0))
    batch = next(pipe.stream(0))
    assert batch.reused.rows.shape[0] == batch.reused.positions.numel() > 0 and len(calls) == 2


def test_presampling_a_chain_with_hot_reuse_is_refused():
    """Found in review: presampling ran the reuse sampler, waited for pushes that never came
    (300 s), then blamed a missing push; with fewer batches it changed the HotReuse."""
    graph = gp.CSCGraph.from_coo(torch.arange(1, 60), torch.zeros(59, dtype=torch.int64), num_nodes=60)
    features = gp.FeatureStore({"feat": torch.randn(60, 3)})
    reuse = gp.HotReuse(torch.nn.Linear(3, 2), features, "feat", gp.hotness_from_degree(graph), 0.1, super_batch=2)
    chain = gp.ItemSampler(gp.ItemSet(torch.arange(60), names="seeds"), 10).sample_neighbor(graph, [3], hot_reuse=reuse)
    with pytest.raises(ValueError, match=r"hotness_from_presampling: `pipe` samples with hot_reuse.*presample the same chain built without"):
        gp.hotness_from_presampling(chain, 60, num_batches=1)
    assert reuse.version == 0
