"""GraphBolt's tutorial notebook (``upstream/walkthrough.ipynb``, vendored unchanged) run
cell by cell with ``import graphpipe as gb`` in place of ``import dgl.graphbolt as gb``
(its ``!pip install`` line dropped), up to its exercise, whose ``gb.from_fused_csc``
GraphBolt itself no longer has. The batch it builds is then checked against the tables
the notebook made: sampled edges exist, features are the rows of the sampled nodes and
edges, and negatives were added to the pairs.
"""

import contextlib
import io
import json
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def _cells():
    """The notebook's code cells before the exercise, with graphpipe as ``gb``."""
    with open(os.path.join(HERE, "upstream", "walkthrough.ipynb")) as f:
        notebook = json.load(f)
    cells = []
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        if "from_fused_csc" in source:
            break
        lines = [line for line in source.splitlines() if not line.lstrip().startswith(("!", "%"))]
        cells.append("\n".join(lines).replace("import dgl.graphbolt as gb", "import graphpipe as gb"))
    return cells


def test_walkthrough_runs_cell_by_cell_and_its_batch_is_right():
    cells = _cells()
    assert len(cells) == 9 and "import graphpipe as gb" in cells[0]
    namespace, printed = {}, io.StringIO()
    with contextlib.redirect_stdout(printed):
        for cell in cells:
            exec(compile(cell, "walkthrough.ipynb", "exec"), namespace)  # noqa: S102 - the vendored notebook
    assert "DGL installed!" in printed.getvalue()
    minibatch = next(iter(namespace["datapipe"]))
    graph, nodes, edges = namespace["graph"], namespace["node_feature_data"], namespace["edge_feature_data"]
    positives = namespace["seeds"][:3]  # the first batch of 3 pairs, then one negative each
    assert minibatch.seeds.shape == (6, 2) and torch.equal(minibatch.seeds[:3], positives)
    assert torch.equal(minibatch.seeds[3:, 0], positives[:, 0]) and minibatch.labels.tolist() == [1, 1, 1, 0, 0, 0]
    src, dst = graph.edge_index()
    existing = set(zip(src.tolist(), dst.tolist()))
    layer = minibatch.sampled_subgraphs[0]
    csc, rows, columns = layer.sampled_csc, layer.original_row_node_ids, layer.original_column_node_ids
    destination = torch.repeat_interleave(torch.arange(csc.indptr.numel() - 1), csc.indptr.diff())
    assert {(int(rows[s]), int(columns[d])) for s, d in zip(csc.indices, destination)} <= existing
    assert torch.equal(minibatch.node_features["feat"], nodes[minibatch.input_nodes])
    assert torch.equal(minibatch.edge_features[0]["feat"], edges[layer.original_edge_ids])
