"""Access counts of a sampling chain's first batches: the hotness score a static
:class:`~graphpipe.GPUCachedFeature` or :class:`~graphpipe.HotReuse` ranks rows by
(GNNLab's and NeutronOrch's presampling)."""

import itertools
from typing import Optional

import torch

from graphpipe._internal.checks import check_int
from graphpipe.pipes.base import upstream


def hotness_from_presampling(pipe, num_rows: int, num_batches: int = 8, node_type: Optional[str] = None) -> torch.Tensor:
    """``[num_rows]`` int64 access counts of ``input_nodes`` over the first ``num_batches``
    batches of ``pipe``'s epoch 0 (a sampling chain, before feature fetching). Nothing in
    ``pipe`` changes: a loader over it still starts at epoch 0, batch_index 0.

    Heterogeneous batches count the type-local ids of ``input_nodes[node_type]`` (the rows
    of that type's features, for a cache of them); with ``node_type=None`` and a chain over
    a typed graph, every type's by global id (``num_rows``: its ``total_num_nodes``; the
    scores :class:`~graphpipe.HotReuse` reads)."""
    num_batches = check_int(num_batches, "num_batches", "hotness_from_presampling", minimum=1)
    if any(getattr(stage, "hot_reuse", None) is not None for stage in upstream(pipe)):
        raise ValueError(
            "hotness_from_presampling: `pipe` samples with hot_reuse, whose batches wait for the model's pushes (and "
            "would change the HotReuse); presample the same chain built without hot_reuse"
        )
    # {node type: (first global id, count)} of the typed graph the chain samples (its nearest stage with a graph)
    graph = next((stage.graph for stage in upstream(pipe) if getattr(stage, "graph", None) is not None), None)
    offsets = None
    if graph is not None and graph.is_heterogeneous:
        bounds = graph.node_type_offset.tolist()
        offsets = {t: (bounds[i], bounds[i + 1] - bounds[i]) for i, t in enumerate(graph.node_types)}
    if offsets is not None:
        want = sum(n for _, n in offsets.values()) if node_type is None else offsets.get(node_type, (0, None))[1]
        if want is not None and num_rows != want:
            of = "the graph's total_num_nodes (node_type=None: every type, by global id)" if node_type is None else (
                f"the number of {node_type!r} nodes (counted by type-local id; node_type=None counts every type by "
                f"global id, as HotReuse reads)"
            )
            raise ValueError(f"hotness_from_presampling: `num_rows` must be {want}, {of}, got {num_rows}")
    counts = torch.zeros(num_rows, dtype=torch.int64)
    batches = pipe.stream(0) if hasattr(pipe, "stream") else pipe
    for minibatch in itertools.islice(batches, num_batches):
        ids = minibatch.input_nodes
        if ids is None:
            raise ValueError("hotness_from_presampling: batches have no `input_nodes`; pass a chain with a sampler")
        if isinstance(ids, dict) and node_type is None and offsets is not None:
            ids = torch.cat([v.cpu() + offsets[t][0] for t, v in ids.items()])
        elif isinstance(ids, dict):
            if node_type not in ids:
                raise ValueError(
                    f"hotness_from_presampling: the batches are heterogeneous; `node_type` must name one of their "
                    f"node types {sorted(ids)}, got {node_type!r} (or pass the sampling chain and node_type=None: "
                    f"global ids)"
                )
            ids = ids[node_type]
        counts += torch.bincount(ids.cpu(), minlength=num_rows)
    return counts
