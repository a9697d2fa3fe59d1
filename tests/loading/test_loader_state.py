"""What a loader state says and what load_state_dict refuses; torch's DataLoader and
torchdata's StatefulDataLoader wrapping a graphpipe DataLoader (resumed in O(1))."""

import io
import json
import threading
import warnings
from typing import Protocol, runtime_checkable

import pytest
import torch
from torch.utils.data import IterableDataset

import graphpipe as gp


def _chain(num_items=68, batch_size=4, seed=3, record=None, sample=False, shuffle=True, fanouts=(2,), replace=False, **options):
    """ItemSampler (karate's nodes cycled) -> [transform(record)] -> [sample_neighbor(**options)] -> fetch_feature."""
    data = gp.datasets.karate_club()
    pipe = gp.ItemSampler(gp.ItemSet(torch.arange(num_items) % 34, names="seeds"), batch_size, shuffle=shuffle, seed=seed)
    if record is not None:
        pipe = pipe.transform(record)
    if sample:
        pipe = pipe.sample_neighbor(data.graph, list(fanouts), replace=replace, seed=5, **options)
    return pipe.fetch_feature(data.features, ["feat"])


def _state(**chain_args):
    loader = gp.DataLoader(_chain(**chain_args))
    iterator = iter(loader)
    for _ in range(3):
        next(iterator)
    return loader.state_dict()


def test_a_state_names_its_position_and_its_pipe_in_plain_data():
    state = _state(sample=True)
    assert state == {
        "epoch": 0,
        "batches_yielded": 3,
        "items": 68,
        "batches": 17,
        "stages": ["ItemSampler", "NeighborSampler", "FeatureFetcher"],
        "seeds": [["ItemSampler", 3], ["NeighborSampler", 5]],
        "options": [
            ["ItemSampler", {"batch_size": 4, "shuffle": True, "drop_last": False}],
            ["NeighborSampler", {
                "fanouts": [[2]], "layout": "block", "mode": "independent", "deduplicate": True, "exclude_seed_edges": False,
                "include_reverse_edges": False, "reverse_edge_types": [-1], "reverse_edge_ids": False, "times": None,
                "hot_reuse": None, "weights": None, "replace": False,
            }],  # fmt: skip
        ],
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    for saved in (torch.load(buffer, weights_only=True), json.loads(json.dumps(state))):
        loader = gp.DataLoader(_chain(sample=True))
        loader.load_state_dict(saved)
        assert next(iter(loader)).batch_index == 3


@pytest.mark.parametrize(
    "other, says",
    [
        (dict(num_items=67), r"items: the state has 68, this loader 67"),  # 17 batches either way
        (dict(batch_size=5), r"batches: the state has 17, this loader 14"),
        (dict(sample=True), r"stages: the state has \['ItemSampler', 'FeatureFetcher'\], this loader \['ItemSampler', 'NeighborSampler'"),
        (dict(seed=4), r"seeds: the state has \[\['ItemSampler', 3\]\], this loader \[\['ItemSampler', 4\]\]"),
    ],
)
def test_a_state_of_another_pipe_is_refused_saying_what_differs(other, says):
    loader = gp.DataLoader(_chain(**other))
    with pytest.raises(ValueError, match=r"the state is from another pipe \(.*" + says):
        loader.load_state_dict(_state())


@pytest.mark.parametrize(
    "saved, other, says",
    [
        # 100 items in 3 batches either way: resuming under batch size 40 would skip 6 items
        (dict(num_items=100, batch_size=34), dict(num_items=100, batch_size=40), r"ItemSampler batch_size: the state has 34, this loader 40\)"),
        (dict(), dict(shuffle=False), r"ItemSampler shuffle: the state has True, this loader False\)"),
        (dict(sample=True), dict(sample=True, fanouts=(3,)), r"NeighborSampler fanouts: the state has \[\[2\]\], this loader \[\[3\]\]\)"),
        (dict(sample=True), dict(sample=True, replace=True), r"NeighborSampler replace: the state has False, this loader True\)"),
        (dict(sample=True), dict(sample=True, layout="pyg"), r"NeighborSampler layout: the state has 'block', this loader 'pyg'\)"),
        (dict(sample=True), dict(sample=True, disjoint=True, layout="pyg"), r"NeighborSampler layout: .*; NeighborSampler mode: the state has 'independent', this loader 'disjoint'\)"),
    ],
)
def test_a_state_of_other_options_with_as_many_batches_is_refused(saved, other, says):
    state = _state(**saved)
    loader = gp.DataLoader(_chain(**other))
    assert state["batches"] == loader.state_dict()["batches"] and state["stages"] == loader.state_dict()["stages"]
    with pytest.raises(ValueError, match=r"the state is from another pipe \(options: " + says):
        loader.load_state_dict(state)


def test_sampling_options_of_link_batches_are_in_the_state():
    """Found in review: weights, seed-edge exclusion and the negatives' exclusion were not
    declared, so a state resumed silently in a pipe sampling other batches."""
    data = gp.datasets.karate_club()
    src, dst = data.graph.edge_index()
    times = {"a": torch.zeros(34, dtype=torch.int64), "b": torch.ones(34, dtype=torch.int64)}
    graph = gp.CSCGraph.from_coo(src, dst, 34, edge_attributes={"w": torch.rand(src.numel())}, node_attributes=times)

    def chain(weights=None, exclude_seed_edges=False, exclude_existing_edges=False, times="a"):
        pairs = gp.ItemSet((torch.stack([src, dst], 1), torch.full((src.numel(),), 10)), names=("seeds", "timestamp"))
        pipe = gp.ItemSampler(pairs, 8, shuffle=True, seed=1)
        pipe = pipe.sample_uniform_negative(graph, 1, seed=2, exclude_existing_edges=exclude_existing_edges, node_timestamp_attr_name=times)
        return gp.DataLoader(pipe.sample_neighbor(graph, [2], seed=3, weights=weights, exclude_seed_edges=exclude_seed_edges))

    loader = chain()
    next(iter(loader))
    state = loader.state_dict()
    for other, says in [
        (dict(weights="w"), r"NeighborSampler weights: the state has None, this loader 'w'"),
        (dict(exclude_seed_edges=True), r"NeighborSampler exclude_seed_edges: the state has False, this loader True"),
        (dict(exclude_existing_edges=True), r"UniformNegativeSampler exclude_existing_edges: the state has False, this loader True"),
        (dict(times="b"), r"UniformNegativeSampler times: the state has \['a', '<'\], this loader \['b', '<'\]"),
    ]:
        with pytest.raises(ValueError, match=r"the state is from another pipe \(options: " + says):
            chain(**other).load_state_dict(state)
    chain().load_state_dict(state)


def test_a_state_of_another_world_size_is_refused():
    items = gp.ItemSet(torch.arange(40), names="seeds")
    # 40 items in 2 global batches of 10 per rank either way: a 2-rank state on 3 ranks would skip 10 items
    state = gp.DataLoader(gp.DistributedItemSampler(items, 10, seed=0, rank=0, world_size=2)).state_dict()
    loader = gp.DataLoader(gp.DistributedItemSampler(items, 10, seed=0, rank=0, world_size=3))
    assert loader.state_dict()["batches"] == state["batches"] == 2
    with pytest.raises(ValueError, match=r"\(options: DistributedItemSampler world_size: the state has 2, this loader 3\)"):
        loader.load_state_dict(state)
    state["options"] = [["DistributedItemSampler", 5]]  # not options of the same stages: the entries side by side
    with pytest.raises(ValueError, match=r"options: the state has \[\['DistributedItemSampler', 5\]\], this loader \[\["):
        loader.load_state_dict(state)


def test_a_state_without_options_is_refused():
    state = _state()
    del state["options"]
    with pytest.raises(ValueError, match=r"`state` lacks \['options'\]"):
        gp.DataLoader(_chain()).load_state_dict(state)


@pytest.mark.parametrize(
    "change, error, says",
    [
        ({"batches_yielded": 18}, ValueError, r"state\['batches_yielded'\] is 18, past the end of an epoch of 17 batches"),
        ({"batches_yielded": -1}, ValueError, r"state\['batches_yielded'\]` must be an int >= 0"),
        ({"epoch": 2**70}, ValueError, r"state\['epoch'\] is 1180591620717411303424; with 17 batches per epoch, batch "
                                       r"indexes \(epoch \* batches \+ batch\) fit in int64 up to epoch 542551296285575046"),
        ({"epoch": "1"}, ValueError, r"state\['epoch'\]` must be an int >= 0, got '1'"),
        ({"seeds": None}, ValueError, r"seeds: the state has None"),
        ({"extra": 1}, ValueError, r"`state` has unknown keys \['extra'\]; a state from DataLoader.state_dict\(\) has the keys"),
    ],
)
def test_a_position_outside_the_pipe_or_an_odd_state_is_refused(change, error, says):
    state = {**_state(), **change}
    with pytest.raises(error, match=says):
        gp.DataLoader(_chain()).load_state_dict(state)


def test_a_state_without_an_entry_is_refused_naming_it():
    state = _state()
    del state["seeds"], state["items"]
    with pytest.raises(ValueError, match=r"`state` lacks \['items', 'seeds'\]; a state from DataLoader.state_dict\(\) has the keys \['epoch'"):
        gp.DataLoader(_chain()).load_state_dict(state)
    with pytest.raises(TypeError, match=r"`state` must be a dict from DataLoader.state_dict\(\), got list"):
        gp.DataLoader(_chain()).load_state_dict([0, 3])


def test_the_last_batch_taken_is_a_state_inside_the_epoch():
    loader = gp.DataLoader(_chain())
    iterator = iter(loader)
    for _ in range(17):
        next(iterator)
    state = loader.state_dict()
    assert (state["epoch"], state["batches_yielded"]) == (0, 17)
    resumed = gp.DataLoader(_chain())
    resumed.load_state_dict(state)
    assert list(resumed) == [] and next(iter(resumed)).batch_index == 17


def _leave_after_three(loader, how):
    try:
        for i, minibatch in enumerate(loader):
            if i == 2:
                if how == "break":
                    break
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass


@pytest.mark.parametrize("how", ["break", "interrupt"])
def test_a_state_taken_after_leaving_the_loop_resumes_the_unfinished_epoch(how):
    # The usual checkpoint on a cluster: leave the loop when time is up (or on a signal), then save.
    whole = [mb.seeds.tolist() for mb in gp.DataLoader(_chain())]
    loader = gp.DataLoader(_chain())
    _leave_after_three(loader, how)
    state = loader.state_dict()
    assert (state["epoch"], state["batches_yielded"]) == (0, 3)
    resumed = gp.DataLoader(_chain())
    resumed.load_state_dict(state)
    assert [mb.seeds.tolist() for mb in resumed] == whole[3:]
    next(iter(loader))  # a new iter() starts the next epoch, and the state says so
    assert (loader.state_dict()["epoch"], loader.state_dict()["batches_yielded"]) == (1, 1)


def test_an_epoch_ended_by_a_new_iter_says_so_instead_of_ending_quietly():
    loader = gp.DataLoader(_chain())
    taken = 0
    with pytest.raises(RuntimeError, match=r"this epoch's iterator was ended by a new iter\(loader\); a loader runs one epoch"):
        for minibatch in loader:
            taken += 1
            if taken == 2:
                next(iter(loader))  # a peek inside the loop
    assert taken == 2
    iterator = iter(loader)
    next(iterator)
    loader.load_state_dict(loader.state_dict())
    with pytest.raises(RuntimeError, match=r"ended by load_state_dict\(\)"):
        next(iterator)
    finished = iter(loader)
    assert len(list(finished)) == 17 - 1  # the loaded state: epoch 2 (after the peek's) from its batch 1
    iter(loader)
    with pytest.raises(StopIteration):  # a finished epoch just ends
        next(finished)


def test_an_iterator_that_yielded_nothing_took_no_epoch():
    """StatefulDataLoader restoring a finished epoch's state calls iter() twice before a batch."""
    loader = gp.DataLoader(_chain())
    iter(loader)
    assert loader.state_dict()["epoch"] == 0
    assert next(iter(loader)).batch_index == 0


@runtime_checkable
class _Stateful(Protocol):
    """torchdata.stateful_dataloader.Stateful (0.11), the protocol its loader looks for."""

    def state_dict(self): ...

    def load_state_dict(self, state_dict): ...


def _recorder():
    """A transform recording the batch indexes it sees (in the loader's threads) and the list."""
    seen, lock = [], threading.Lock()

    def record(minibatch):
        with lock:
            seen.append(minibatch.batch_index)
        return minibatch

    return record, seen


def test_torchs_dataloader_iterates_a_loader_as_an_iterable_dataset_and_resumes_it_in_O_1():
    """What torchdata's StatefulDataLoader (num_workers=0, batch_size=None) does with an
    IterableDataset that is Stateful: it saves ``dataset.state_dict()`` with its own state,
    and restores by ``dataset.load_state_dict(saved)`` before ``iter(dataset)``, without
    fast-forwarding. (A gp.DataLoader was taken for a map-style dataset:
    "'DataLoader' object is not subscriptable".)"""
    want = [mb.batch_index for mb in _chain()]
    loader = gp.DataLoader(_chain(record=_recorder()[0]))
    assert isinstance(loader, IterableDataset) and isinstance(loader, _Stateful)
    head = []
    for minibatch in torch.utils.data.DataLoader(loader, batch_size=None):
        head.append(minibatch.batch_index)
        if len(head) == 6:
            saved = loader.state_dict()
            break
    record, seen = _recorder()
    resumed = gp.DataLoader(_chain(record=record))
    resumed.load_state_dict(saved)
    rest = [mb.batch_index for mb in torch.utils.data.DataLoader(resumed, batch_size=None)]
    assert head + rest == want and min(seen) == 6  # nothing before the position is made again


def test_a_loader_in_torchs_worker_processes_says_to_wrap_it_without_them(monkeypatch):
    monkeypatch.setattr(gp.loading.loader, "get_worker_info", lambda: object())  # as inside a torch worker
    with pytest.raises(RuntimeError, match=r"inside a worker process of a torch DataLoader: wrap it with num_workers=0"):
        iter(gp.DataLoader(_chain()))


def test_torchdatas_stateful_dataloader_wraps_a_loader_and_resumes_it_in_O_1():
    stateful_dataloader = pytest.importorskip("torchdata.stateful_dataloader")
    want = [mb.batch_index for mb in _chain()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torchdata 0.11 calls torch.set_vital, deprecated
        outer = stateful_dataloader.StatefulDataLoader(gp.DataLoader(_chain(record=_recorder()[0])), batch_size=None)
        head = []
        for minibatch in outer:
            head.append(minibatch.batch_index)
            if len(head) == 6:
                saved = outer.state_dict()
                break
        record, seen = _recorder()
        resumed = stateful_dataloader.StatefulDataLoader(gp.DataLoader(_chain(record=record)), batch_size=None)
        resumed.load_state_dict(saved)
        rest = [mb.batch_index for mb in resumed]
        assert head + rest == want and min(seen) == 6
        # A state taken after an epoch ended resumes at the next epoch (the loop above
        # left epoch 0 unfinished: a new one, epoch 1, runs here).
        assert len(list(outer)) == 17
        ended = outer.state_dict()
        again = stateful_dataloader.StatefulDataLoader(gp.DataLoader(_chain(record=_recorder()[0])), batch_size=None)
        again.load_state_dict(ended)
        assert next(iter(again)).batch_index == 2 * 17
