"""manifest.json is untrusted: a malformed field is refused with a ValueError naming
manifest.json and the field (not a KeyError, TypeError or RecursionError from deep
inside load_partition / load_item_sets, nor a silent load)."""

import json
import shutil

import pytest

from graphpipe.distributed import load_item_sets, load_partition, partition

from test_cooperative import contiguous_partition, items, link_items
from test_partitioned import KINDS, attributed_graph, full_store

NOT_A_MANIFEST = r"manifest\.json is not a graphpipe partition manifest \("
MISMATCH = r"does not hold the graph the manifest describes \(manifest\.json's "


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """kind -> a 2-part partition of the test graph, its features and node and link items."""
    out = {}
    for kind in KINDS:
        graph = attributed_graph(kind)
        out[kind] = tmp_path_factory.mktemp(kind)
        partition(graph, full_store(graph, kind), {"train": items(kind), "link": link_items(kind)}, 2, out[kind])
    return out


def train(m, i=0):
    return m["item_sets"]["train"]["types"][i]


def move_edges(m):
    """Typed: one edge type's count moved to another (their sum kept), that type dropped."""
    per_type = m["edges_per_type"]
    first, second = list(per_type)[:2]
    per_type[second] += per_type.pop(first)


# (kinds, edit, match, whether load_item_sets refuses it too: False for the checks against the part graph)
EDITS = {
    "num_nodes str": (KINDS, lambda m: m.update(num_nodes=str(m["num_nodes"])), NOT_A_MANIFEST + "`num_nodes` must be an int >= 0", True),
    "num_nodes negative": (KINDS, lambda m: m.update(num_nodes=-1), NOT_A_MANIFEST + "`num_nodes` must be", True),
    "num_edges str": (KINDS, lambda m: m.update(num_edges="x"), NOT_A_MANIFEST + "`num_edges` must be an int >= 0", True),
    "num_edges negative": (KINDS, lambda m: m.update(num_edges=-3), NOT_A_MANIFEST + "`num_edges` must be an int >= 0", True),
    "typed not a bool": (KINDS, lambda m: m.update(typed="yes"), NOT_A_MANIFEST + "`typed` must be a bool", True),
    "typed flipped": (KINDS, lambda m: m.update(typed=not m["typed"], edges_per_type=m["edges_per_type"] or {"_N:_E:_N": m["num_edges"]}), MISMATCH + "`typed`", False),
    "edges_per_type missing": (KINDS, lambda m: m.pop("edges_per_type"), NOT_A_MANIFEST + "no field 'edges_per_type'", True),
    "edges_per_type list": (("typed",), lambda m: m.update(edges_per_type=[1, 2]), NOT_A_MANIFEST + "`edges_per_type` must be a dict", True),
    "edges_per_type count str": (("typed",), lambda m: m["edges_per_type"].update({"paper:cites:paper": "7"}), NOT_A_MANIFEST + "`edges_per_type` must be", True),
    "edges_per_type sum": (("typed",), lambda m: m["edges_per_type"].update({k: v + 1000 for k, v in m["edges_per_type"].items()}), NOT_A_MANIFEST + "`edges_per_type` must be", True),
    "edges_per_type other types": (("typed",), move_edges, MISMATCH + "`edges_per_type`", False),
    "node_features dict": (KINDS, lambda m: m.update(node_features={}), NOT_A_MANIFEST + "`node_features` must be a list", True),
    "node feature file list": (KINDS, lambda m: m["node_features"][0].update(file=["a"]), NOT_A_MANIFEST + r"`node_features\[0\]\['file'\]` must be a str", True),
    "node feature name list": (KINDS, lambda m: m["node_features"][0].update(name=["feat"]), NOT_A_MANIFEST + r"`node_features\[0\]\['name'\]` must be a str", True),
    "edge feature ids missing": (KINDS, lambda m: m["edge_features"][0].pop("ids"), NOT_A_MANIFEST + "no field 'ids'", True),
    "edge feature ids int": (KINDS, lambda m: m["edge_features"][0].update(ids=3), NOT_A_MANIFEST + r"`edge_features\[0\]\['ids'\]` must be a str", True),
    "item typed missing": (KINDS, lambda m: m["item_sets"]["train"].pop("typed"), NOT_A_MANIFEST + "no field 'typed'", True),
    "item typed not a bool": (KINDS, lambda m: m["item_sets"]["train"].update(typed=1), NOT_A_MANIFEST + r"`item_sets\['train'\]\['typed'\]` must be a bool", True),
    "item typed flipped": (KINDS, lambda m: m["item_sets"]["train"].update(typed=not m["item_sets"]["train"]["typed"]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[:\]\['type'\]` must be", True),
    "item type ghost": (KINDS, lambda m: train(m).update(type="ghost" if train(m)["type"] is None else None), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[:\]\['type'\]` must be", True),
    "item type twice": (("typed",), lambda m: train(m, 1).update(type=train(m)["type"]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[:\]\['type'\]` must be distinct str", True),
    "item types empty": (("untyped",), lambda m: m["item_sets"]["train"].update(types=[]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[:\]\['type'\]` must be \[None\]", True),
    "item names str": (KINDS, lambda m: train(m).update(names="seeds"), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[0\]\['names'\]` must be a list", True),
    "item names without seeds": (KINDS, lambda m: train(m).update(names=["a", "b"]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[0\]\['names'\]` must be a list of distinct str with 'seeds'", True),
    "item names twice": (KINDS, lambda m: train(m).update(names=["seeds", "seeds"]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[0\]\['names'\]`", True),
    "item files str": (KINDS, lambda m: train(m).update(files=train(m)["files"][0]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[0\]\['files'\]` must be a list of str, one per name", True),
    "item files shorter": (KINDS, lambda m: train(m).update(files=train(m)["files"][:1]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[0\]\['files'\]`", True),
    "item ids list": (KINDS, lambda m: train(m).update(ids=[train(m)["ids"]]), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[0\]\['ids'\]` must be a str", True),
    "item num_items bool": (KINDS, lambda m: train(m).update(num_items=True), NOT_A_MANIFEST + r"`item_sets\['train'\]\['types'\]\[0\]\['num_items'\]` must be an int >= 0", True),
    "deep nesting": (KINDS, lambda m: "[" * 100_000 + "]" * 100_000, NOT_A_MANIFEST + "maximum recursion depth", True),
}
CASES = [pytest.param(kind, name, id=f"{kind}-{name}") for name, (kinds, *_) in EDITS.items() for kind in kinds]


@pytest.mark.parametrize("kind, name", CASES)
def test_a_malformed_manifest_field_is_refused(written, kind, name, tmp_path):
    """Each edit of one field is refused with a ValueError naming manifest.json and the
    field, by load_partition on either rank (default and full validation) and by
    load_item_sets, which reads the same manifest."""
    _, edit, match, by_item_sets = EDITS[name]
    out = tmp_path / "parts"
    shutil.copytree(written[kind], out)
    manifest = json.loads((out / "manifest.json").read_text())
    text = edit(manifest)  # a new manifest text, or (None or what a pop returns) the dict edited
    (out / "manifest.json").write_text(text if isinstance(text, str) and text.startswith("[[") else json.dumps(manifest))
    for rank in (0, 1):
        for validate in (None, True):
            with pytest.raises(ValueError, match=match):
                load_partition(out, rank, validate=validate)
    if by_item_sets:
        with pytest.raises(ValueError, match=match):
            load_item_sets(out)


@pytest.mark.parametrize("method", ["hash", "assignment"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_manifest_partition_writes_loads(kind, method, tmp_path):
    """The checks refuse no manifest partition() writes: with features and node and link
    items, and without any (empty feature lists and item sets)."""
    graph = attributed_graph(kind)
    owners = contiguous_partition(graph, 2) if method == "assignment" else method
    full = tmp_path / "full"
    partition(graph, full_store(graph, kind), {"train": items(kind), "link": link_items(kind)}, 2, full, method=owners)
    bare = tmp_path / "bare"
    partition(graph, None, None, 2, bare, method=owners)
    for out in (full, bare):
        for rank in (0, 1):
            part = load_partition(out, rank, validate=True)
            assert part.graph.is_heterogeneous == (kind == "typed")
        assert sorted(load_item_sets(out)) == ([] if out == bare else ["link", "train"])
    assert sum(len(load_partition(full, r).item_sets["train"]) for r in (0, 1)) == len(items(kind))
