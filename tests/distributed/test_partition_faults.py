"""Faults of partitioned datasets: a rank that dies or hangs mid-epoch, damaged or
missing part files, and resuming cooperative batches over parts from a checkpoint."""

import json
import os
import re
import shutil
import time

import pytest
import torch
import torch.distributed as dist

import graphpipe as gp
from graphpipe.distributed import load_partition, partition
from graphpipe.distributed.cooperative import _REPORT_WAIT_S
from graphpipe.features.part import file_checksum

from dist_harness import run_ranks, values
from test_cooperative import items, link_items
from test_partitioned import KINDS, LINK_OPTIONS, NODE_OPTIONS, attributed_graph, batch_record, full_store, link_pipe, node_pipe, same

pytestmark = [
    pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available"),
    pytest.mark.usefixtures("kernels_for_child_processes"),  # the children load them from the cache
]

TIMEOUT_S = 8  # the process group's timeout in the fault tests


def untyped_parts(out_dir, num_parts):
    graph = attributed_graph("untyped")
    partition(graph, full_store(graph, "untyped"), {"train": items("untyped")}, num_parts, out_dir)
    return str(out_dir)


def failing_rank(rank, world_size, out_dir, workdir, how):
    """Cooperative node batches over this rank's part; rank 1 exits (``how="exits"``) or
    stops taking batches (``"hangs"``) after its 3rd batch, having written the time to
    ``workdir/stopped``. Returns ``(time, error message)`` of the error the others get."""
    part = load_partition(out_dir, rank, num_parts=world_size)
    source = gp.DistributedItemSampler.from_part(part, "train", 8, shuffle=True, seed=3, drop_uneven_inputs=True)
    pipe = node_pipe("untyped", part.graph, part.features, part.partition, source=source)
    try:
        for i, _ in enumerate(gp.DataLoader(pipe)):
            if rank == 1 and i == 2:
                with open(os.path.join(workdir, "stopped"), "w") as f:
                    f.write(repr(time.time()))
                if how == "hangs":  # its loader's threads stop when their queues fill
                    # Until the other ranks have returned (the harness's rank{r}.pkl), at most the
                    # time they may take and 4 s: a longer hang would show them nothing new.
                    deadline, others = time.monotonic() + TIMEOUT_S + _REPORT_WAIT_S + 4, (0, 2)
                    while time.monotonic() < deadline and not all(os.path.exists(os.path.join(workdir, f"rank{r}.pkl")) for r in others):
                        time.sleep(0.05)
                os._exit(3)
    except RuntimeError as error:
        return time.time(), str(error)
    return None, "finished"




@pytest.mark.parametrize("how", ["exits", "hangs"])
def test_a_rank_that_dies_or_hangs_is_named(how, tmp_path):
    """3 gloo ranks; rank 1 exits (or hangs) mid-epoch: ranks 0 and 2 raise an error naming
    rank 1, at once when it exits (its connections close), within the process group's
    timeout when it hangs; not a raw gloo error, not a hang."""
    out_dir = untyped_parts(tmp_path / "parts", 3)
    outcomes = run_ranks(failing_rank, 3, tmp_path, args=(out_dir, str(tmp_path), how), timeout=120, collective_timeout=TIMEOUT_S)
    assert outcomes[1] == ("error", "rank 1 died with exit code 3")
    stopped = float((tmp_path / "stopped").read_text())
    limit = (TIMEOUT_S if how == "hangs" else 0) + _REPORT_WAIT_S + 3  # measured: + 0.1 s
    for rank in (0, 2):
        status, (when, message) = outcomes[rank]
        assert status == "ok" and when is not None, (rank, outcomes[rank])
        assert message.startswith(f"graphpipe: rank {rank}: a collective (all_to_all_single) of 3 ranks failed: rank 1 did not report it"), message
        assert "restart every rank" in message
        assert 0 < when - stopped < limit, (rank, when - stopped, message)


# ----------------------------------------------------------------- damaged or missing parts
PART_FILES = ("graph.pt", "nodes.npy", "node-feat-0.npy", "edge-ids-0.npy", "edge-feat-0.npy", "items-0-0-1.npy", "items-0-0-ids.npy")
LAZY = ("node-feat-0.npy", "edge-feat-0.npy")  # by default checked when first read


def owned_parts(out_dir):
    """2 parts of the untyped graph, owners given (so ``owners.npy`` is written), with node
    and edge features and node items."""
    graph = attributed_graph("untyped")
    owners = torch.arange(graph.total_num_nodes) % 2
    partition(graph, full_store(graph, "untyped"), {"train": items("untyped")}, 2, out_dir, method=owners)
    return out_dir


def load_and_read(out_dir, rank, validate=None):
    """Load part ``rank`` and read a few rows of each of its features (their lazy checks)."""
    part = load_partition(out_dir, rank, num_parts=2, validate=validate)
    part.features["feat"].read(part.nodes[:3])
    edge_feature = part.features["edge", None, "ew"]
    edge_feature.read(edge_feature.ids[:3])
    return part


def damage(path, how):
    if how == "missing":
        os.unlink(path)
    elif how == "truncated":
        os.truncate(path, os.path.getsize(path) // 2)
    else:  # a flipped byte in the middle
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))


MESSAGES = {"missing": "is missing", "truncated": r"is \d+ bytes, the manifest says \d+", "flipped": "does not match its checksum"}


@pytest.mark.parametrize("how", ["missing", "truncated", "flipped"])
@pytest.mark.parametrize("name", [*PART_FILES, "owners.npy"])
def test_a_damaged_part_file_is_named(name, how, tmp_path):
    """Every file of part 1 (and the shared ``owners.npy``) missing, truncated or with a
    flipped byte: loading part 1 raises a ValueError naming it, at load (the features'
    checksums on first read by default, all at load with ``validate=True``); part 0 loads
    and reads as before, unless the damaged file is shared."""
    out = owned_parts(tmp_path)
    relative = name if name == "owners.npy" else f"part-1/{name}"
    damage(out / relative, how)
    shown = re.escape(f"'{relative}'" if how != "flipped" or name not in LAZY else name)
    with pytest.raises(ValueError, match=f"{shown}.*{MESSAGES[how]}|{MESSAGES[how]}.*{shown}"):
        load_and_read(out, 1)
    with pytest.raises(ValueError, match=re.escape(f"'{relative}'")):
        load_partition(out, 1, validate=True)
    if name != "owners.npy":
        load_and_read(out, 0, validate=True)


def test_a_missing_part_directory_is_named(tmp_path):
    out = owned_parts(tmp_path)
    shutil.rmtree(out / "part-1")
    with pytest.raises(ValueError, match="part directory 'part-1' is missing"):
        load_partition(out, 1)
    load_and_read(out, 0, validate=True)


def plant_outside_copy(out, relative, tmp_path):
    """Move ``out/relative`` outside the partition directory and link it back: the same bytes."""
    outside = tmp_path / "elsewhere" / os.path.basename(relative)
    outside.parent.mkdir(exist_ok=True)
    shutil.move(out / relative, outside)
    os.symlink(outside, out / relative)


@pytest.mark.parametrize("planted", ["file", "part directory", "other part's file", "manifest"])
def test_planted_symlinks(planted, tmp_path):
    """A symlink in the partition directory: one leading outside it is refused (even to the
    very bytes the manifest lists), naming the file; one to another part's file fails its
    checks as a damaged file."""
    out = owned_parts(tmp_path / "parts")
    if planted == "file":
        plant_outside_copy(out, "part-1/node-feat-0.npy", tmp_path)
        match = "'part-1/node-feat-0.npy' resolves to .* outside the directory"
    elif planted == "part directory":
        plant_outside_copy(out, "part-1", tmp_path)
        match = "'part-1/.*' resolves to .* outside the directory"
    elif planted == "other part's file":  # the same size: 150 owned nodes each
        os.unlink(out / "part-1" / "nodes.npy")
        os.symlink(os.path.join("..", "part-0", "nodes.npy"), out / "part-1" / "nodes.npy")
        match = "'part-1/nodes.npy' does not match its checksum"
    else:
        plant_outside_copy(out, "manifest.json", tmp_path)
        match = "manifest.json is a symlink"
    with pytest.raises(ValueError, match=match):
        load_and_read(out, 1)
    if planted != "manifest":
        load_and_read(out, 0, validate=True)


def edit_manifest(out, edit):
    manifest = json.loads((out / "manifest.json").read_text())
    edit(manifest)
    (out / "manifest.json").write_text(json.dumps(manifest))


def listing_of(out, relative):
    """A manifest file entry of ``relative`` (its true size and CRC-32)."""
    return {"size": os.path.getsize(out / relative), "crc32": file_checksum(str(out / relative))}


def test_a_manifest_pointing_outside_is_refused(tmp_path):
    """Manifest entries naming files outside the directory (relative, absolute, or as
    the owners entry or a feature's file) are refused, though a valid file lies there."""
    out = owned_parts(tmp_path / "parts")
    shutil.copytree(out / "part-1", tmp_path / "elsewhere")
    outside = str(tmp_path / "elsewhere" / "nodes.npy")
    files = lambda m: m["parts"][1]["files"]  # noqa: E731
    edits = {
        "malformed file entry '../../elsewhere/nodes.npy'": lambda m: files(m).update({"../../elsewhere/nodes.npy": files(m).pop("nodes.npy")}),
        f"malformed file entry '{re.escape(outside)}'": lambda m: files(m).update({outside: files(m).pop("nodes.npy")}),
        "malformed file entry 'owners.npy'": lambda m: m.update(owners=outside),
        "lists no part file 'part-1/../../elsewhere/node-feat-0.npy'": lambda m: m["node_features"][0].update(file="../../elsewhere/node-feat-0.npy"),
        "lists no part file 'part-1/../../elsewhere/items-0-0-0.npy'": lambda m: m["item_sets"]["train"]["types"][0]["files"].__setitem__(0, "../../elsewhere/items-0-0-0.npy"),
    }
    original = (out / "manifest.json").read_text()
    for match, edit in edits.items():
        edit_manifest(out, edit)
        with pytest.raises(ValueError, match=match):
            load_and_read(out, 1)
        (out / "manifest.json").write_text(original)
    load_and_read(out, 1, validate=True)


def test_an_edited_manifest_is_refused(tmp_path):
    """A feature entry of the manifest with a type the part graph lacks (or without a
    field), or an item count its parts' files do not hold, is refused, naming
    manifest.json and the field."""
    out = owned_parts(tmp_path / "parts")
    edits = {
        r"manifest.json's node_features entry 'feat' has `type` 'ghost', not one of the part graph's node types \[None\]": lambda m: m["node_features"][0].update(type="ghost"),
        r"manifest.json's edge_features entry 'ew' has `type` 'a:b:c'": lambda m: m["edge_features"][0].update(type="a:b:c"),
        r"manifest.json is not a graphpipe partition manifest \(no field 'name'\)": lambda m: m["node_features"][0].pop("name"),
        r"manifest.json's item_sets\['train'\] `num_items` is 5, but the parts' 'items-0-0-ids.npy' files hold 300 items": lambda m: m["item_sets"]["train"]["types"][0].update(num_items=5),
        r"item_sets\['train'\] `num_items` is 301, but": lambda m: m["item_sets"]["train"]["types"][0].update(num_items=301),
    }
    original = (out / "manifest.json").read_text()
    for match, edit in edits.items():
        edit_manifest(out, edit)
        for validate in (None, True):
            with pytest.raises(ValueError, match=match):
                load_partition(out, 1, validate=validate)
        (out / "manifest.json").write_text(original)
    load_and_read(out, 1, validate=True)


# ----------------------------------------------------------------- resuming on parts
STOP_AT = 2  # the interrupted run stops after 2 batches of epoch 0 (typed node batches: 3 per epoch)


def resumable_rank(rank, world_size, out_dirs, mode, state_dir, link_epochs=1):
    """Per kind and task, this rank's cooperative batch records over its part (2 epochs of
    node batches, ``link_epochs`` of link batches): all of them (``mode="full"``), the first
    ``STOP_AT`` with the loader's state saved after each (``"stop"``), or the rest, from the
    saved state (``"resume"``)."""
    out = {}
    for kind in KINDS:
        part = load_partition(out_dirs[kind], rank, num_parts=world_size)
        for task, make, size, options in (("node", node_pipe, 16, NODE_OPTIONS), ("link", link_pipe, 4, LINK_OPTIONS)):
            source = gp.DistributedItemSampler.from_part(part, task, size, **options)
            epochs = 2 if task == "node" else link_epochs
            extra = {} if task == "node" else {"negatives": False}  # as test_partitioned's from_part test
            loader = gp.DataLoader(make(kind, part.graph, part.features, None, source=source, **extra))
            state_file = os.path.join(state_dir, f"{kind}-{task}-{rank}.pt")
            if mode == "resume":
                loader.load_state_dict(torch.load(state_file))
            records = []
            while loader.state_dict()["epoch"] < epochs and not (mode == "stop" and len(records) == STOP_AT):
                for mb in loader:
                    records.append(batch_record(mb))
                    if mode == "stop":
                        torch.save(loader.state_dict(), state_file)
                        if len(records) == STOP_AT:
                            break
            loader.close()
            out[kind, task] = records
    return out


def partitioned_datasets(tmp_path, num_parts):
    """{kind: out_dir} of node and link items' partitions."""
    out_dirs = {}
    for kind in KINDS:
        graph = attributed_graph(kind)
        out_dirs[kind] = str(tmp_path / kind)
        partition(graph, full_store(graph, kind), {"node": items(kind), "link": link_items(kind)}, num_parts, out_dirs[kind])
    return out_dirs


def test_resuming_on_parts_reproduces_the_uninterrupted_run(tmp_path):
    """2 gloo ranks, cooperative node and link batches (features, seed-edge exclusion)
    over parts, typed and untyped: a run stopped after 2 batches of epoch 0 and
    resumed in new processes from each rank's saved loader state yields, per rank, the
    batches the uninterrupted run yields after its 3rd, bit for bit."""
    out_dirs = partitioned_datasets(tmp_path, 2)
    runs = {}
    for mode in ("full", "stop", "resume"):  # each in new processes, with a new process group
        os.mkdir(tmp_path / mode)
        runs[mode] = values(run_ranks(resumable_rank, 2, tmp_path / mode, args=(out_dirs, mode, str(tmp_path))))
    for rank in range(2):
        for key, full in runs["full"][rank].items():
            stopped, resumed = runs["stop"][rank][key], runs["resume"][rank][key]
            assert len(stopped) == STOP_AT and len(full) > STOP_AT + 1, key
            assert same(stopped + resumed, full), (rank, key)


def test_a_second_epoch_of_link_batches_on_parts(tmp_path):
    """The uninterrupted run of the resume test with 2 epochs of link batches: a rank's
    typed link share that from_part leaves empty (``seeds`` ``{}``, in epoch 1) is an
    link batch without pairs (its layers: the vertices it owns of the other rank's pairs),
    and both ranks go on together."""
    runs = values(run_ranks(resumable_rank, 2, tmp_path, args=(partitioned_datasets(tmp_path, 2), "full", str(tmp_path), 2)))
    empty = [record for run in runs for record in run["typed", "link"] if record["raw_seeds"] == {}]
    assert empty, "no rank got an empty share of a typed link batch"
    for record in empty:
        assert record["compacted_seeds"] == {} and record["item_ids"] == {}
    for key in runs[0]:
        assert [r["batch_index"] for r in runs[0][key]] == [r["batch_index"] for r in runs[1][key]], key
