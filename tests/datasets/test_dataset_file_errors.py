"""Bad dataset files and metadata.yaml entries give errors that name the file or the entry
and the expected form (issue 29)."""

import gzip
import os

import numpy as np
import pytest
import torch

pytest.importorskip("yaml")

import graphpipe as gp  # noqa: E402
from graphbolt_layout import write_graphbolt_dataset  # noqa: E402
from graphpipe.datasets import _files  # noqa: E402
from test_ondisk import write_typed  # noqa: E402


def whole_gzip(text: bytes) -> bytes:
    return gzip.compress(text)


BAD_CSV = {
    # name: (file name, bytes, regex of the message after the file name)
    "empty": ("a.csv", b"", "is empty; expected numeric rows"),
    "empty gzip": ("a.csv.gz", whole_gzip(b""), "is empty; expected numeric rows"),
    "non-ASCII": ("a.csv", "0,1\n\n2,\u00e9\n".encode(), r"line 3 holds a non-ASCII byte \(0xc3\)"),
    # values were joined over all lines and only their total counted: these became [[0, 1], [2, 3], [1, 2]]
    "short then long line": ("a.csv", b"0,1\n2\n3,1,2\n", r"line 2 has 1 comma-separated values, expected 2"),
    "long then short line": ("a.csv.gz", whole_gzip(b"0,1\n\n2,3,4\n5\n"), r"line 3 has 3 comma-separated values, expected 2"),
    # numpy's parser reads an int64 beyond its range as the range's limit
    "beyond int64": ("a.csv", b"0,1\n\n2,-99999999999999999999\n", r"line 3 holds -99999999999999999999, beyond int64's range"),
    "malformed value": ("a.csv", b"0,1\n\n2,x\n", r"lines 1..3 do not hold 2 comma-separated numbers each"),
    "truncated gzip": ("a.csv.gz", whole_gzip(b"0,1\n2,3\n" * 1000)[:-30], "cannot be decompressed .*truncated"),
    "not gzip": ("a.csv.gz", b"0,1\n2,3\n", "cannot be decompressed .*BadGzipFile.*not gzip at all"),
    "corrupted gzip": ("a.csv.gz", whole_gzip(b"0,1\n2,3\n" * 1000)[:20] + b"\xff" * 40 + whole_gzip(b"0,1\n" * 1000)[60:],
                       "cannot be decompressed"),  # fmt: skip
}


@pytest.mark.parametrize("case", sorted(BAD_CSV))
@pytest.mark.parametrize("reader", ["read_csv", "csv_to_npy"])
def test_bad_csv_files_are_named(tmp_path, case, reader):
    name, data, message = BAD_CSV[case]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ValueError, match=f"'{path}'.*{message}"):
        if reader == "read_csv":
            _files.read_csv(str(path), np.int64)
        else:
            _files.csv_to_npy(str(path), str(tmp_path / "out.npy"), np.int64)
    assert sorted(os.listdir(tmp_path)) == [name]  # nothing left behind


def test_a_misaligned_line_is_found_in_a_later_block(tmp_path, monkeypatch):
    monkeypatch.setattr(_files._line_blocks, "__defaults__", (16,))  # blocks of about 4 lines
    path = tmp_path / "a.csv"
    path.write_bytes(b"0,1\n" * 20 + b"\r\n" + b"2,3\n4\n5,6,7\n")
    with pytest.raises(ValueError, match=rf"'{path}': line 23 has 1 comma-separated values, expected 2"):
        _files.read_csv(str(path), np.int64, expected_columns=2)
    path.write_bytes(b"0,1\n" * 20 + b"\r\n" + b"2,3\n")
    assert _files.read_csv(str(path), np.int64).tolist() == [[0, 1]] * 20 + [[2, 3]]


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", " is empty"),
        (b"0,1,5\n1,2,6\n", " has 3 comma-separated columns, expected 2"),  # it named a scratch file and shape (3, 2)
        (b"0\t1\n1\t2\n", " has 1 comma-separated columns, expected 2"),
        (b"0,1\n2\n3,1,2\n", r": line 2 has 1 comma-separated values, expected 2"),  # it read edges 0-1, 2-3, 1-2
    ],
)
def test_a_bad_edge_csv_names_the_entry_and_the_file(tmp_path, data, message):
    write_graphbolt_dataset(tmp_path, "csv")
    (tmp_path / "edge_data" / "edges.csv").write_bytes(data)
    with pytest.raises(ValueError, match=rf"metadata.yaml graph.edges\[0\] \('.*edges.csv'\): '.*edges.csv'{message}"):
        gp.datasets.OnDiskDataset(tmp_path)


@pytest.mark.parametrize("typed", [False, True])
def test_empty_lines_in_an_edge_csv_are_skipped_as_graphbolt_skips_them(tmp_path, typed):
    """GraphBolt reads CSV with pandas, which skips blank lines (empty, or spaces and tabs only) and a
    leading UTF-8 BOM: a trailing empty line was refused, and so were these."""
    if typed:
        write_typed(tmp_path)
        path = tmp_path / "edges" / "writes.csv"
    else:
        write_graphbolt_dataset(tmp_path, "csv")
        path = tmp_path / "edge_data" / "edges.csv"
    expected = gp.datasets.OnDiskDataset(tmp_path).graph
    lines = path.read_bytes().splitlines()
    path.write_bytes(b"\r\n" + b"\r\n".join(lines[:5]) + b"\r\n\r\n\n" + b"\n".join(lines[5:]) + b"\n\n")
    graph = gp.datasets.OnDiskDataset(tmp_path).graph
    assert torch.equal(graph.indptr, expected.indptr) and torch.equal(graph.indices, expected.indices)
    # a leading UTF-8 BOM and lines of spaces and tabs, which pandas skips too, were refused
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines[:5]) + b"\n \n\t\n" + b"\n".join(lines[5:]) + b"\n  \n")
    graph = gp.datasets.OnDiskDataset(tmp_path).graph
    assert torch.equal(graph.indptr, expected.indptr) and torch.equal(graph.indices, expected.indices)


def test_a_numpy_edge_file_is_read_whatever_its_name(tmp_path):
    """GraphBolt reads it (typed graphs did too); a homogeneous one was refused with
    "CSCGraph.from_coo_files: `src` must be the path of a .npy file", an argument the
    user never passed."""
    write_graphbolt_dataset(tmp_path, "numpy")
    expected = gp.datasets.OnDiskDataset(tmp_path).graph
    os.rename(tmp_path / "edge_data" / "edges.npy", tmp_path / "edge_data" / "edges.bin")
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace("path: edge_data/edges.npy", "path: edge_data/edges.bin"))
    graph = gp.datasets.OnDiskDataset(tmp_path).graph
    assert torch.equal(graph.indptr, expected.indptr) and torch.equal(graph.indices, expected.indices)
    (tmp_path / "edge_data" / "edges.bin").write_bytes(b"0,1\n1,2\n")
    with pytest.raises(ValueError, match=r"graph.edges\[0\] \('.*edges.bin'\): `format` is 'numpy', but the file is not a "
                                         r".npy file .*set `format: csv`$"):  # fmt: skip
        gp.datasets.OnDiskDataset(tmp_path)


BLANK_AND_BOM = {
    "space-only line": b"0,1\n \n1,2",
    "trailing space-only line": b"0,1\n1,2\n \n",
    "tab, space and CR line": b"0,1\r\n\t \r\n1,2\r\n",
    "space-only first line": b"  \n0,1\n1,2\n",
    "BOM": b"\xef\xbb\xbf0,1\n1,2\n",
    "BOM, then a blank line": b"\xef\xbb\xbf\n0,1\n \n1,2",
}


@pytest.mark.parametrize("case", sorted(BLANK_AND_BOM))
@pytest.mark.parametrize("name", ["a.csv", "a.csv.gz"])
@pytest.mark.parametrize("block_bytes", [4, 1 << 26])
def test_whitespace_only_lines_and_a_bom_are_skipped_as_pandas_skips_them(tmp_path, monkeypatch, case, name, block_bytes):
    """pandas (GraphBolt's CSV reader) skips them; they were refused."""
    monkeypatch.setattr(_files._line_blocks, "__defaults__", (block_bytes,))
    data = BLANK_AND_BOM[case]
    (tmp_path / name).write_bytes(whole_gzip(data) if name.endswith(".gz") else data)
    assert _files.read_csv(str(tmp_path / name), np.int64, expected_columns=2).tolist() == [[0, 1], [1, 2]]
    assert _files.csv_to_npy(str(tmp_path / name), str(tmp_path / "out.npy"), np.int64, transpose=True).tolist() == [[0, 1], [1, 2]]


def test_lines_after_whitespace_only_lines_and_a_bom_are_numbered_as_in_the_file(tmp_path):
    path = tmp_path / "a.csv"
    path.write_bytes(b"\xef\xbb\xbf\n0,1\n \t\n\r\n2\n")
    with pytest.raises(ValueError, match=rf"'{path}': line 5 has 1 comma-separated values, expected 2"):
        _files.read_csv(str(path), np.int64, expected_columns=2)


def test_a_feature_path_that_is_a_directory_is_named(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    os.remove(tmp_path / "node_data" / "feat.npy")
    os.mkdir(tmp_path / "node_data" / "feat.npy")
    with pytest.raises(ValueError, match=r"feature_data\[0\] \(node feature 'feat'\): '.*feat.npy' is not a regular file \(a directory"):
        gp.datasets.OnDiskDataset(tmp_path)



FEAT = "in_memory: false\n    path: node_data/feat.npy"
BAD_FEATURE_TABLES = {
    # name: (old text, new text, file -> its content, regex of the message after the entry and file)
    "in_memory: false, not .npy": (FEAT, "in_memory: false\n    path: node_data/feat.bin",
                                   {"node_data/feat.bin": np.ones((300, 2), np.float32)},
                                   r"feature_data\[0\] \(node feature 'feat'\) \('.*feat.bin'\): Feature: a path must name a .npy"),
    # memory-mapped in place (read into memory, it is made contiguous: see the test below)
    "Fortran order, in_memory: false": (FEAT, FEAT, {"node_data/feat.npy": np.asfortranarray(np.ones((300, 2), np.float32))},
                                        r"feature_data\[0\] \(node feature 'feat'\) \('.*feat.npy'\) is stored in Fortran "
                                        r"\(column-major\) order.*numpy.save\(path, numpy.ascontiguousarray\(numpy.load\(path\)\)\)"),
    "sparse tensor": ("", "", {"node_data/year.pt": torch.ones(300, 2).to_sparse()},
                      r"feature_data\[1\] \(node feature 'year'\): '.*year.pt' holds a torch.sparse_coo tensor, expected a dense one"),
}


@pytest.mark.parametrize("case", sorted(BAD_FEATURE_TABLES))
def test_a_feature_table_graphpipe_refuses_names_the_entry_and_the_file(tmp_path, case):
    """These named neither (e.g. "Feature: `data` must store its rows C-contiguously")."""
    write_graphbolt_dataset(tmp_path, "numpy")
    old, new, files, message = BAD_FEATURE_TABLES[case]
    text = (tmp_path / "metadata.yaml").read_text()
    assert old in text
    (tmp_path / "metadata.yaml").write_text(text.replace(old, new, 1))
    for name, table in files.items():
        if name.endswith(".pt"):
            torch.save(table, tmp_path / name)
        else:
            with open(tmp_path / name, "wb") as f:
                np.save(f, table)
    with pytest.raises(ValueError, match=message):
        gp.datasets.OnDiskDataset(tmp_path)

@pytest.mark.parametrize("disk_based", [False, True])
def test_a_table_read_into_memory_is_made_contiguous(tmp_path, disk_based):
    """A Fortran-order .npy (what numpy.save(path, dataframe.values) writes) and tensors saved
    as views were refused ("`data` must store its rows C-contiguously ... pass a contiguous
    copy"), though the user passed no table and GraphBolt reads them."""
    write_graphbolt_dataset(tmp_path, "numpy")
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace(FEAT, "path: node_data/feat.npy", 1))
    feat = np.arange(600, dtype=np.float32).reshape(300, 2)
    np.save(tmp_path / "node_data" / "feat.npy", np.asfortranarray(feat))
    year = torch.arange(600).reshape(300, 2)
    torch.save(year.T.contiguous().T, tmp_path / "node_data" / "year.pt")  # a transposed view
    torch.save(torch.arange(4000)[::2], tmp_path / "edge_data" / "feat.pt")  # 1-D, every other element
    (tmp_path / "metadata.yaml").write_text((tmp_path / "metadata.yaml").read_text().replace(
        "format: numpy\n    in_memory: false\n    path: edge_data/feat.npy", "format: torch\n    path: edge_data/feat.pt"))
    ds = gp.datasets.OnDiskDataset(tmp_path, disk_based_features=disk_based)
    ids = torch.tensor([299, 0, 7])
    assert torch.equal(ds.feature.read("node", None, "feat", ids), torch.from_numpy(feat)[ids])
    assert torch.equal(ds.feature.read("node", None, "year", ids), year[ids])
    assert torch.equal(ds.feature.read("edge", None, "feat", ids), (2 * ids).reshape(-1, 1))


NUMPY_EDGES = "    - format: numpy\n      path: edge_data/edges.npy"
BAD_METADATA = {
    # name: (old text, new text, regex of the message)
    "edge path null": (NUMPY_EDGES, "    - format: numpy\n      path: null",
                       r"graph.edges\[0\] lacks `path` \(a path relative to the dataset directory \(a non-empty string\)\)"),
    "edge path int": (NUMPY_EDGES, "    - format: numpy\n      path: 5",
                      r"graph.edges\[0\]: `path` must be a path relative to the dataset directory .*got 5"),
    "edge format": (NUMPY_EDGES, "    - format: parquet\n      path: edge_data/edges.npy",
                    r"graph.edges\[0\]: `format` must be 'csv' or 'numpy', got 'parquet'"),
    "edge not a mapping": (NUMPY_EDGES, "    - edge_data/edges.npy",
                           r"graph.edges\[0\] must be a mapping with fields \['format', 'path'\], got 'edge_data/edges.npy'"),
    "feature path list": ("path: node_data/feat.npy", "path: [a.npy, b.npy]",
                          r"feature_data\[0\] \(node feature 'feat'\): `path` must be .* got \['a.npy', 'b.npy'\]"),
    "feature format": ("format: torch\n    path: node_data/year.pt", "format: pickle\n    path: node_data/year.pt",
                       r"feature_data\[1\] \(node feature 'year'\): `format` must be 'numpy' or 'torch', got 'pickle'"),
    "in_memory": ("in_memory: false\n    path: node_data/feat.npy", "in_memory: sometimes\n    path: node_data/feat.npy",
                  r"feature_data\[0\] \(node feature 'feat'\): `in_memory` must be true or false, got 'sometimes'"),
    "negative count": ("- num: 300", "- num: -3", r"graph.nodes\[0\]: `num` must be an integer >= 0, got -3"),
    "count as text": ("- num: 300", "- num: lots", r"graph.nodes\[0\]: `num` must be an integer >= 0, got 'lots'"),
    "set data path": ("path: set/train_seeds.npy", "path: {a: 1}",
                      r"tasks\[0\].train_set\[0\].data\[0\] \(field 'seeds'\): `path` must be .* got \{'a': 1\}"),
    "set without data": ("    train_set:\n      - data:", "    train_set:\n      - other:",
                         r"tasks\[0\].train_set\[0\] lacks `data` \(a non-empty list of entries\)"),
    # it was warned of and dropped, so the model trained without the feature
    "feature domain misspelt": ("feature_data:\n  - domain: node\n    name: feat", "feature_data:\n  - domain: nodes\n    name: feat",
                                r"feature_data\[0\] \(nodes feature 'feat'\): `domain` must be 'node', 'edge' or 'graph'.*got 'nodes'"),
    "feature_data not a list": ("feature_data:\n  - domain: node\n    name: feat",
                                "feature_data: 3\nunused:\n  - domain: node\n    name: feat",
                                r"metadata.yaml: `feature_data` must be a list of entries, got 3"),
}


@pytest.mark.parametrize("case", sorted(BAD_METADATA))
def test_metadata_fields_of_the_wrong_kind_name_the_entry(tmp_path, case):
    write_graphbolt_dataset(tmp_path, "numpy", seed_name="seeds")
    old, new, message = BAD_METADATA[case]
    text = (tmp_path / "metadata.yaml").read_text()
    assert old in text
    (tmp_path / "metadata.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=message):
        gp.datasets.OnDiskDataset(tmp_path)


BAD_TYPES = {
    "node type with ':'": ("    - type: author\n      num: 30", "    - type: \"co:author\"\n      num: 30",
                           r"graph.nodes\[1\]: `type` must be a node type name: a non-empty string without ':'"),
    "edge type of two parts": ('    - type: "author:writes:paper"\n      format: csv', '    - type: "author:paper"\n      format: csv',
                               r"graph.edges\[0\]: `type` must be an edge type 'src_type:relation:dst_type'"),
    "feature of a node type with ':'": ("    type: author\n    name: feat", "    type: \"a:b\"\n    name: feat",
                                        r"feature_data\[1\] \(node feature 'feat'\): `type` must be a node type name"),
    "node type twice": ("    - type: author\n      num: 30", "    - type: paper\n      num: 30",
                        r"graph.nodes\[1\]: node type 'paper' is listed twice"),
}


@pytest.mark.parametrize("case", sorted(BAD_TYPES))
def test_bad_type_names_are_refused(tmp_path, case):
    write_typed(tmp_path)
    old, new, message = BAD_TYPES[case]
    text = (tmp_path / "metadata.yaml").read_text()
    assert old in text
    (tmp_path / "metadata.yaml").write_text(text.replace(old, new, 1))
    with pytest.raises(ValueError, match=message):
        gp.datasets.OnDiskDataset(tmp_path)


@pytest.mark.parametrize("array", [np.array(["a", "b"] * 150), np.zeros(300, ">f4"), np.zeros(300, np.complex64),
                                   np.zeros(300, np.dtype([("a", np.int32)]))], ids=["text", "big-endian", "complex", "record"])  # fmt: skip
@pytest.mark.parametrize("in_memory", [True, False])
def test_unsupported_dtypes_are_named(tmp_path, array, in_memory):
    write_graphbolt_dataset(tmp_path, "numpy")
    if in_memory:
        text = (tmp_path / "metadata.yaml").read_text()
        (tmp_path / "metadata.yaml").write_text(text.replace("in_memory: false\n    path: node_data/feat.npy", "path: node_data/feat.npy"))
    np.save(tmp_path / "node_data" / "feat.npy", array)
    with pytest.raises(ValueError, match=r"feature_data\[0\] \(node feature 'feat'\): '.*feat.npy' holds dtype .*expected a bool, "
                                         r"integer or floating dtype"):  # fmt: skip
        gp.datasets.OnDiskDataset(tmp_path)


def test_a_feature_with_fewer_rows_is_refused_and_more_rows_accepted(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    np.save(tmp_path / "node_data" / "feat.npy", np.ones((299, 8), np.float32))
    with pytest.raises(ValueError, match=r"feature_data\[0\] \(node feature 'feat'\): .* has 299 rows, expected 300"):
        gp.datasets.OnDiskDataset(tmp_path)
    np.save(tmp_path / "node_data" / "feat.npy", np.ones((310, 8), np.float32))  # padding, nodes added later
    assert gp.datasets.OnDiskDataset(tmp_path).feature["feat"].num_rows == 310


BOMB = """\
a: &a [1, 1, 1, 1, 1, 1]
b: &b [*a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e]
"""  # YAML aliases: 60 lines of text, 6**6 numbers when expanded


def test_yaml_aliases_are_not_expanded_into_messages_or_the_cache_stamp(tmp_path):
    write_graphbolt_dataset(tmp_path, "numpy")
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(BOMB + text.replace("    - num: 300", "    - num: 300\n      note: *f"))
    with pytest.warns(UserWarning, match=r"graph.nodes\[0\]: ignoring unknown field\(s\) \['note'\]") as warned:
        gp.datasets.OnDiskDataset(tmp_path)  # an extra field is ignored, and not stamped
    assert len(str(warned[0].message)) < 500
    assert os.path.getsize(tmp_path.with_name(tmp_path.name + ".graphpipe") / "graph.json") < 4000
    (tmp_path / "metadata.yaml").write_text(BOMB + text.replace(NUMPY_EDGES, "    - *f"))
    with pytest.raises(ValueError, match=r"graph.edges\[0\] must be a mapping with fields \['format', 'path'\]") as error:
        gp.datasets.OnDiskDataset(tmp_path)
    assert len(str(error.value)) < 2000


def test_a_graph_feature_is_skipped_with_a_warning(tmp_path):
    """GraphBolt 2.1 reads `domain: graph` features; graphpipe stores node and edge features."""
    write_graphbolt_dataset(tmp_path, "numpy")
    np.save(tmp_path / "graph_feat.npy", np.ones((1, 3), np.float32))
    text = (tmp_path / "metadata.yaml").read_text()
    entry = "  - domain: graph\n    name: label\n    format: numpy\n    path: graph_feat.npy\n"
    (tmp_path / "metadata.yaml").write_text(text.replace("\nfeature_data:\n", "\nfeature_data:\n" + entry, 1))
    with pytest.warns(UserWarning, match=r"skipping metadata.yaml feature_data\[0\] \(graph feature 'label'\): 'graph' features are not read"):
        ds = gp.datasets.OnDiskDataset(tmp_path)
    assert ("graph", None, "label") not in ds.feature.keys() and ("node", None, "feat") in ds.feature.keys()


def test_a_misspelt_field_is_warned_of(tmp_path):
    """``in_memroy: false`` was ignored unseen: the table was read into memory. Unknown
    fields are kept as the feature's metadata(), as GraphBolt keeps them; one close to a
    field read is warned of."""
    write_graphbolt_dataset(tmp_path, "numpy")
    text = (tmp_path / "metadata.yaml").read_text()
    (tmp_path / "metadata.yaml").write_text(text.replace("in_memory: false\n    path: node_data/feat.npy", "in_memroy: false\n    path: node_data/feat.npy"))
    with pytest.warns(UserWarning, match=r"feature_data\[0\] \(node feature 'feat'\): field\(s\) \['in_memroy'\] are kept as extra fields \(metadata\(\)\), not read; a misspelling\? The fields read here are \[.*'in_memory'"):
        ds = gp.datasets.OnDiskDataset(tmp_path)
    assert ds.feature.metadata("node", None, "feat") == {"in_memroy": False}
