"""Hot-vertex embedding reuse with bounded staleness (NeutronOrch, Ai et al., VLDB 2024).

A few hot vertices account for most of the bottom layer's work: their neighbourhoods are
sampled and their neighbours' features fetched and aggregated batch after batch. The hot
set is fixed (the vertices with the highest given scores) or, with ``hotness="super_batch"``,
chosen per super-batch by exact access counts over its batches, as NeutronOrch's code does
(:meth:`HotReuse.counted_hot_set`). With
``sample_neighbor(..., hot_reuse=HotReuse(...))`` the bottom layer does not expand the hot
vertices a batch reaches (but its own seeds; typed or untyped graphs, NS or LABOR-0). The
first of a super-batch's ``n`` batches to need them computes the bottom-layer output of the
hot vertices its batches reach (:meth:`HotReuse.super_batch_hot_set`), on the CPU, in one call
of a snapshot of the bottom module's weights, and every batch carries the rows it needs
(``MiniBatch.reused``) for :meth:`HotReuse.insert` to put into the bottom layer's output.

Versions count training steps: version ``v`` is the bottom module's weights after ``v``
:meth:`HotReuse.push` calls (one after every optimizer step; version 0 is the module as
given). The ``b``-th batch this process trains (its ordinal: its ``batch_index``, unless a
DistributedItemSampler rank skips the last global batch of each epoch) is in super-batch
``s = b // n`` and reuses rows computed with version ``max(0, (s - 1) n)``, so on the step
that trains it (version ``b``) they are at most ``2n - 1`` steps old, NeutronOrch's bound. Every row is a function
of the batch position and the weights of a fixed version, whatever runs ahead: a sampler
that needs a version not pushed yet waits for the training loop (and raises after
``timeout`` seconds, naming the missing push), so batches stay deterministic and resumable.

No gradient flows from a batch into the reused rows' old computation at once: what the
batches of a super-batch send to its rows is summed, and once the super-batch is trained it
is backpropagated through the copy of the bottom layer that computed them (the weights of
its version); that gradient joins the bottom layer's next one (hooks on its parameters), as
asynchronous SGD's stale gradients do. Measured (``benchmarks/hot_reuse.py``, RESULTS.md):
without it the hot vertices' share of the bottom layer's gradient is lost and accuracy fell
6 points; with it and ``super_batch=2`` it stays within 0.5 point of no reuse. A resumed run
loses the gradient of the super-batch in progress at the checkpoint.
"""

from __future__ import annotations

import copy
import hashlib
import math
import threading
import time
import weakref
from typing import Callable, Dict, Optional, Tuple, Union

import torch

from graphpipe._internal.checks import as_int, check_int
from graphpipe.batch.minibatch import MiniBatch, ReusedRows
from graphpipe.features.store import FeatureStore
from graphpipe.graph.sampled_subgraph import SampledSubgraph

__all__ = ["HotReuse"]

BottomCall = Callable[[torch.nn.Module, SampledSubgraph, torch.Tensor], torch.Tensor]


class HotReuse:
    """The hot vertices, their bottom module's weights by version, and their reused rows.

    One sampler uses it (its super-batches are keyed by position only): a second is refused.

    Args:
        bottom: the model's bottom layer (a ``torch.nn.Module``); copies of it compute the
            hot vertices' rows on the CPU, in eval mode; hooks on its parameters add the
            rows' gradient to its own.
        features: the :class:`FeatureStore` the chain fetches from, without a GPU cache
            (a CPU cache is fine; give ``fetch_feature`` the store with the GPU cache);
            ``feature`` names the bottom layer's input node feature in it (of every node
            type on a typed graph).
        hotness: how the hot vertices are chosen. ``[num_nodes]`` scores, by global id on a
            typed graph (``gp.hotness_from_degree(graph)``, ``gp.hotness_from_presampling(chain,
            graph.total_num_nodes)``: no ``node_type``):
            one hot set for the whole run, the ``round(hot_ratio * num_nodes)`` highest scores.
            Or ``"super_batch"``: a hot set per super-batch, by exact access counts over its
            ``n`` batches (NeutronOrch's), see :meth:`counted_hot_set`. On a typed graph
            ``bottom`` takes a typed subgraph and ``{node type: rows}`` and gives ``{node
            type: rows}``, as R-GCN layers over GraphBolt's typed blocks do, and ``insert``
            takes and gives such dicts.
        hot_ratio: the fraction of nodes that are hot, in ``[0, 1]`` (with
            ``hotness="super_batch"``: of the vertices the super-batch's bottom layer reaches).
        super_batch: ``n``, the batches that share one computation of the hot rows (2:
            staleness at most 3 steps; 8 cost 3.4 points of accuracy in RESULTS.md's run).
        call: how to run ``bottom``: :meth:`block_style` (``bottom(subgraph, h)``, the
            default) or :meth:`pyg_style` (``bottom((h, h_dst), edge_index)``).
        timeout: seconds a sampler waits for the training loop to push the weights it needs
            (a loader left in the middle of an epoch leaves its threads waiting that long).
    """

    @staticmethod
    def block_style(module: torch.nn.Module, subgraph: SampledSubgraph, h: torch.Tensor) -> torch.Tensor:
        """A DGL-style bottom layer: ``module(subgraph, h)`` (``h``: ``[num_src, d]`` rows of the
        subgraph's source nodes, destinations first) gives ``[num_dst, d']``."""
        return module(subgraph, h)

    @staticmethod
    def pyg_style(module: torch.nn.Module, subgraph: SampledSubgraph, h: torch.Tensor) -> torch.Tensor:
        """A PyG-style bottom layer (a ``MessagePassing`` conv): ``module((h, h[:num_dst]),
        edge_index)``, ``edge_index`` ``[2, E]`` (source rows, destination rows)."""
        src, dst = subgraph.edge_index()
        return module((h, h[: subgraph.num_dst_nodes]), torch.stack([src, dst]))

    def __init__(
        self,
        bottom: torch.nn.Module,
        features: FeatureStore,
        feature: str,
        hotness: Union[torch.Tensor, str],
        hot_ratio: float,
        super_batch: int = 2,
        call: BottomCall = block_style,
        timeout: float = 300.0,
    ):
        if not isinstance(bottom, torch.nn.Module):
            raise TypeError(f"HotReuse: `bottom` must be the model's bottom layer, a torch.nn.Module, got {type(bottom).__name__}")
        if not isinstance(features, FeatureStore):
            raise TypeError(f"HotReuse: `features` must be a FeatureStore, got {type(features).__name__}")
        self.counted = isinstance(hotness, str) and hotness == "super_batch"
        if not self.counted and (not isinstance(hotness, torch.Tensor) or hotness.dim() != 1):
            got = repr(hotness) if isinstance(hotness, str) else f"{type(hotness).__name__} shape {tuple(getattr(hotness, 'shape', ()))}"
            raise ValueError(
                f"HotReuse: `hotness` must be a 1-D tensor with one score per node (global ids on a typed graph) or "
                f"'super_batch' (a hot set per super-batch, by access counts), got {got}"
            )
        if not self.counted and (hotness.is_complex() or not torch.isfinite(hotness).all()):
            bad = hotness.dtype if hotness.is_complex() else f"{int((~torch.isfinite(hotness)).sum())} NaN or infinite scores"
            raise ValueError(f"HotReuse: `hotness` must be finite real scores (torch.topk ranks NaN highest), got {bad}")
        self.features, self.feature = features, feature
        self.node_types = None  # a typed graph's, once a sampler is built on it (bind)
        self._sampler = None  # a weak reference to that sampler (its copies in a loader are not built again)
        self._reads_batches = False  # whether an item sampler upstream gives a super-batch's batches again (bind)
        self._row_bytes = 0
        if not isinstance(hot_ratio, (int, float)) or not 0.0 <= hot_ratio <= 1.0:
            raise ValueError(f"HotReuse: `hot_ratio` must be a fraction in [0, 1], got {hot_ratio!r}")
        self.super_batch = check_int(super_batch, "super_batch", "HotReuse", minimum=1)
        if not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"HotReuse: `timeout` must be a positive number of seconds, got {timeout!r}")
        if self.counted:  # chosen per super-batch (counted_hot_set)
            self.hotness_size, self.hot, self.hot_ratio = None, None, float(hot_ratio)
        else:
            self.hotness_size = hotness.numel()
            num_hot = int(round(hot_ratio * hotness.numel()))
            self.hot = torch.sort(torch.topk(hotness.to(torch.float64), num_hot).indices).values  # [H] ascending ids
            self.hot_ratio = num_hot / max(hotness.numel(), 1)
            self._hot_digest = hashlib.sha256(self.hot.numpy().tobytes()).hexdigest()[:16]  # names the hot set in a state
        self.staleness = 2 * self.super_batch - 1
        self.call = call
        self.timeout = float(timeout)
        self._module = copy.deepcopy(bottom).cpu().eval()
        self._changed = threading.Condition()
        self._counting = threading.Lock()  # one hot set counted at a time (upstream stages run again)
        # (global batches, this process's batches) per epoch; (1, 1): every batch is this process's
        self._per_epoch: Tuple[int, int] = (1, 1)
        # Per super-batch its rows, their autograd graphs and the gradient its batches send back
        # (backpropagated once it is trained: the weights' gradient joins the next step's).
        self._supers: Dict[int, _SuperBatch] = {}
        self._pending: Dict[str, torch.Tensor] = {}
        for name, parameter in bottom.named_parameters():
            if parameter.requires_grad:
                parameter.register_hook(lambda grad, name=name: self._with_pending(name, grad))
        self.version = 0
        state = bottom.state_dict()
        self._weights: Dict[int, Dict[str, torch.Tensor]] = {0: _snapshot(state)}
        self._shapes = _shapes(state)  # what push and load_state_dict check
        self.reset_stats()

    # ------------------------------------------------------------------ the training loop's side
    def push(self, bottom: torch.nn.Module) -> None:
        """Record the bottom layer's weights after one more optimizer step (call it after
        every step): version ``v + 1``; versions that super-batches read are kept. ``bottom``
        must be the module HotReuse was built with (its type, parameter names and shapes)."""
        kind = type(self._module).__name__
        if type(bottom) is not type(self._module):
            raise TypeError(f"HotReuse.push: `bottom` must be the bottom layer HotReuse was built with, a {kind}, got {type(bottom).__name__}")
        state = bottom.state_dict()
        differ = self._differences(state)
        if differ:
            raise ValueError(
                f"HotReuse.push: `bottom` must be the bottom layer HotReuse was built with, got a {kind} whose parameters "
                f"differ: {differ}"
            )
        trained = None
        with self._changed:
            self.version += 1
            if self.version % self.super_batch == 0:
                self._weights[self.version] = _snapshot(state)
                for old in [v for v in self._weights if v < self.version - 2 * self.super_batch]:
                    del self._weights[old]
                trained = self._supers.pop(self.version // self.super_batch - 1, None)
            self._changed.notify_all()
        if trained is not None:
            self._backpropagate(trained)

    def _backpropagate(self, trained: "_SuperBatch") -> None:
        """The gradient a trained super-batch's batches sent to its hot rows, through the
        module copy that computed them: added to the bottom layer's next gradient."""
        if trained.out is None or not trained.grad.any():
            return
        parameters = dict(trained.module.named_parameters())
        names = [name for name, p in parameters.items() if p.requires_grad]
        grads = torch.autograd.grad(trained.out, [parameters[n] for n in names], trained.grad, allow_unused=True)
        with self._changed:
            for name, g in zip(names, grads):
                if g is not None:
                    self._pending[name] = self._pending[name] + g if name in self._pending else g

    def bind(self, sampler, where: str, per_epoch: Optional[Tuple[int, int]] = None) -> None:
        """Check this reuse against the graph of ``sampler`` (named ``where``), the one sampler
        that uses it; ``per_epoch``: the item sampler upstream's ``(num_global_batches, len())``, which
        differ when a rank skips the last global batch of each epoch (None: no item sampler)."""
        owner = None if self._sampler is None else self._sampler()
        if owner is not None and owner is not sampler:
            raise ValueError(
                f"{where}: `hot_reuse` is already used by another {type(owner).__name__} (still referenced); one "
                f"sampler uses a HotReuse (its super-batches are keyed by batch position): make a HotReuse per "
                f"sampler (an evaluation chain samples without one), and a new one for a new run"
            )
        graph = sampler.graph
        self._per_epoch = per_epoch if per_epoch is not None and per_epoch[0] != per_epoch[1] else (1, 1)
        self._reads_batches = per_epoch is not None
        if self.hotness_size is not None and self.hotness_size != graph.total_num_nodes:
            raise ValueError(
                f"{where}: `hot_reuse` has a hotness score for {self.hotness_size} nodes, but the graph has "
                f"{graph.total_num_nodes}"
            )
        self.node_types = list(graph.node_types) if graph.is_heterogeneous else None
        self._offsets = graph.node_type_offset.to(torch.int64) if graph.is_heterogeneous else None
        types = self.node_types or [None]
        for node_type in types if (self.hot_ratio if self.counted else self.hot.numel()) else []:
            if ("node", node_type, self.feature) not in self.features:
                raise KeyError(f"{where}: `hot_reuse` reads node feature {self.feature!r} of type {node_type!r}, which the store lacks")
        rows = [self.features["node", t, self.feature] for t in types if ("node", t, self.feature) in self.features]
        if not all(f.concurrent_reads for f in rows):
            raise ValueError(
                f"{where}: `hot_reuse` reads node feature {self.feature!r} from the sampler's threads while fetch_feature "
                f"reads the features too, but a feature of its store allows one reader at a time (a GPU cache); give "
                f"HotReuse the store you gave gpu_cached_feature (without the cache)"
            )
        self._row_bytes = max((math.prod(f.row_shape) * f.dtype.itemsize for f in rows), default=0)
        self._sampler = weakref.ref(sampler)

    def _inputs(self, input_nodes):
        """The bottom layer's input rows of the hot sample's ``input_nodes`` (by type if typed)."""
        if isinstance(input_nodes, dict):
            return {t: self.features["node", t, self.feature].read_valid(ids).cpu() for t, ids in input_nodes.items()}
        return self.features["node", None, self.feature].read_valid(input_nodes).cpu()

    def _stacked(self, out, hot: torch.Tensor) -> torch.Tensor:
        """The bottom module's output for the sample of ``hot`` (ascending ids), ``[H, d]`` in
        their order."""
        if not isinstance(out, dict):
            return out
        per_type = torch.searchsorted(hot, self._offsets).diff().tolist()
        missing = [t for t, n in zip(self.node_types, per_type) if n and t not in out]
        if missing:
            raise ValueError(f"HotReuse: the bottom module gave no rows for node types {missing} of hot vertices")
        return torch.cat([out[t] for t, n in zip(self.node_types, per_type) if n])

    def _with_pending(self, name: str, grad: torch.Tensor) -> torch.Tensor:
        with self._changed:
            pending = self._pending.pop(name, None)
        return grad if pending is None else grad + pending.to(grad)

    def insert(self, h: torch.Tensor, minibatch: MiniBatch) -> torch.Tensor:
        """``h`` (the bottom layer's output, ``[num_dst, d]`` rows of its destinations) with
        the batch's reused rows put in (no gradient through them). Raises if they are older
        than ``2 * super_batch - 1`` steps: more steps were pushed than batches came before
        it (a new DataLoader starting again at batch 0, or more than one push a step).

        Typed: ``h`` is ``{node type: [num_dst of the type, d]}`` and so is the result. A type
        ``h`` lacks (an R-GCN layer gives no rows for a type without sampled in-edges) is
        added if all its destinations are reused rows; if only some are, insert raises."""
        reused = minibatch.reused
        if reused is None or reused.positions.numel() == 0:
            return h
        if not isinstance(h, dict):
            return self._put(h, minibatch)
        parts, keep = self._typed_parts(h, minibatch)  # every destination type, as the positions count them
        whole = self._put(torch.cat(list(parts.values())), minibatch)
        pieces = dict(zip(parts, whole.split([part.shape[0] for part in parts.values()])))
        return {t: pieces[t] for t in keep}

    def _typed_parts(self, h: Dict[str, torch.Tensor], minibatch: MiniBatch):
        """``({node type: rows}, kept types)``: per destination type of the batch's bottom layer, in
        node-type order (the reused positions' order), ``h``'s rows or, for a type ``h`` lacks,
        zeros, kept only if every row of the type is a reused one."""
        counts = minibatch.sampled_subgraphs[0].num_dst_nodes
        positions, rows = minibatch.reused.positions, minibatch.reused.rows
        like = next(iter(h.values()), rows)
        parts, keep, start = {}, [], 0
        for t in self.node_types:
            n = counts.get(t, 0)
            hot = int(((positions >= start) & (positions < start + n)).sum())
            start += n
            if t in h and h[t].shape[0] != n:
                raise ValueError(
                    f"HotReuse.insert: `h[{t!r}]` must have a row per {t!r} destination of batch "
                    f"{minibatch.batch_index}'s bottom layer ({n}), got {h[t].shape[0]}"
                )
            if t not in h and 0 < hot < n:
                raise ValueError(
                    f"HotReuse.insert: `h` has no rows for node type {t!r}, but batch {minibatch.batch_index} reuses "
                    f"rows for {hot} of its {n} {t!r} destinations: the bottom module must give rows for every "
                    f"destination type that has vertices it computed (h[{t!r}] of shape [{n}, ...])"
                )
            if t in h or n:
                parts[t] = h[t] if t in h else like.new_zeros((n, *rows.shape[1:]))
            if t in h or (n and hot == n):
                keep.append(t)
        return parts, keep

    def _put(self, h: torch.Tensor, minibatch: MiniBatch) -> torch.Tensor:
        """``h`` ``[num_dst, d]`` with the batch's reused rows at their positions (see insert)."""
        reused = minibatch.reused
        age = self.version - reused.version
        if age > self.staleness:
            raise RuntimeError(
                f"HotReuse: batch {minibatch.batch_index} reuses rows of weights version {reused.version}, {age} steps "
                f"old (bound {self.staleness}): {self.version} steps were pushed, but {self._ordinal(minibatch.batch_index)} "
                f"batches came before it. A HotReuse follows one run of batches, and a new DataLoader starts again at "
                f"batch 0: make a new HotReuse (and sampler) for a new run, or resume the run: loader.load_state_dict(...) "
                f"with reuse.load_state_dict(...). Call reuse.push(bottom_layer) once after every optimizer step"
            )
        self._age_max = max(self._age_max, age)
        rows = reused.rows.to(h.device, h.dtype).requires_grad_(h.requires_grad)
        trained_with = self._supers.get(reused.super_index)
        if rows.requires_grad and trained_with is not None:  # their gradient goes to the super-batch's graphs
            rows.register_hook(lambda grad: trained_with.accumulate(reused.hot_index, grad))
        return h.index_copy(0, reused.positions.to(h.device), rows)

    # ------------------------------------------------------------------ the sampler's side
    def _super(self, super_index: int) -> "_SuperBatch":
        """Super-batch ``super_index``'s store, made with the weights after ``max(0, (s - 1) n)``
        steps once they are pushed (waiting at most ``timeout``)."""
        version = max(0, (super_index - 1) * self.super_batch)
        with self._changed:
            found = self._supers.get(super_index)
            if found is not None:
                return found
            if not self._changed.wait_for(lambda: self.version >= version, self.timeout):
                raise RuntimeError(
                    f"HotReuse: super-batch {super_index} reuses the bottom layer's weights after {version} steps, but "
                    f"only {self.version} were pushed in {self.timeout:.0f} s: call reuse.push(bottom_layer) after "
                    f"every optimizer step"
                )
            if version not in self._weights:
                raise RuntimeError(
                    f"HotReuse: super-batch {super_index} reads the bottom layer's weights after {version} steps, but "
                    f"{self.version} were pushed and those are gone: a HotReuse follows one run of batches, batch b "
                    f"after b steps, and a new DataLoader starts again at batch 0. Make a new HotReuse (and sampler) "
                    f"for a new run, or resume the run: loader.load_state_dict(...) with reuse.load_state_dict(...)"
                )
            module = copy.deepcopy(self._module)
            module.load_state_dict(self._weights[version])
            return self._supers.setdefault(super_index, _SuperBatch(module, version))

    def reused_rows(self, sampler, nodes: torch.Tensor, batch_index: int, seeds: torch.Tensor) -> Tuple[torch.Tensor, ReusedRows]:
        """For a batch's bottom-layer destinations ``nodes`` (``[n]`` global ids, type-major),
        ``seeds`` ``[n]`` bool its seeds, which are never reused: which are hot (``[n]`` bool)
        and their reused rows. The first of a super-batch's batches to get here computes the
        rows of its whole hot set (:meth:`super_batch_hot_set`) in one call of the bottom
        module over their own sample (:meth:`SubgraphSampler.sample_hot_layer`): the rows are a
        function of the super-batch, to the bit, whichever batch or thread comes first."""
        super_index = self._ordinal(batch_index) // self.super_batch
        store = self._super(super_index)
        with store.lock:
            first = store.hot is None
            if first:  # set only once its rows are: a call that raised leaves it to the next batch
                hot = self.super_batch_hot_set(sampler, super_index)
                if hot.numel():
                    subgraph, input_nodes = sampler.sample_hot_layer(hot, super_index)
                    store.add(self._stacked(self.call(store.module, subgraph, self._inputs(input_nodes)), hot))
                store.hot = hot
        hot = torch.isin(nodes, store.hot) & ~seeds
        positions = torch.nonzero(hot).view(-1)
        hot_index = torch.searchsorted(store.hot, nodes[positions])
        reused = ReusedRows(positions, store.rows[hot_index], store.version, super_index, hot_index)
        self._batches += 1
        self._reused += positions.numel()
        self._computed += store.hot.numel() if first else 0
        return hot, reused

    def super_batch_hot_set(self, sampler, super_index: int) -> torch.Tensor:
        """Super-batch ``s``'s hot set, ``[H]`` int64 ascending global ids: with
        ``hotness="super_batch"`` :meth:`counted_hot_set`; else the hot vertices its batches
        reach as bottom-layer destinations other than their seeds (read again as
        :meth:`counted_hot_set` reads them), or every hot vertex if no ItemSampler upstream
        can give its batches again. A function of ``s`` alone."""
        if self.counted:
            return self.counted_hot_set(sampler, super_index)
        if not self._reads_batches or self.hot.numel() == 0:
            return self.hot
        reached = torch.cat(self._reached(sampler, super_index))
        return self.hot[torch.isin(self.hot, reached)]

    def counted_hot_set(self, sampler, super_index: int) -> torch.Tensor:
        """``hotness="super_batch"``: super-batch ``s``'s hot set, ``[H]`` int64 ascending
        global ids. Its ``n`` batches (this process's ``s n``-th to ``(s n + n - 1)``-th, read
        again from the ItemSampler upstream, one super-batch at a time) have their upper layers sampled as their own samples
        do (:meth:`SubgraphSampler.bottom_destinations`); a vertex's access count is the
        number of them whose bottom layer has it as a destination other than a seed (the
        rows reuse can replace). The hot set is the ``floor(hot_ratio * R)`` most accessed
        of the ``R`` vertices accessed at all (NeutronOrch's share), ties to the lower id:
        a function of ``s`` alone, whichever batch or thread asks first."""
        ids, counts = torch.unique(torch.cat(self._reached(sampler, super_index)), return_counts=True)  # ascending ids
        num_hot = math.floor(round(self.hot_ratio * ids.numel(), 6))  # 0.57 * 100 is 56.99...: 57
        most = torch.sort(counts, descending=True, stable=True).indices[:num_hot]
        self._counted += 1
        self._counted_hot += most.numel()
        return torch.sort(ids[most]).values

    def _reached(self, sampler, super_index: int):
        """Per batch of super-batch ``super_index``, ``[k]`` int64 global ids: its bottom-layer
        destinations but its seeds (:meth:`SubgraphSampler.bottom_destinations`), timed."""
        first = super_index * self.super_batch
        with self._counting:
            started = time.perf_counter()
            reached = sampler.bottom_destinations(self._batch_index(first), self._batch_index(first + self.super_batch - 1) + 1)
            self._counting_seconds += time.perf_counter() - started
        return reached

    def _ordinal(self, batch_index: int) -> int:
        """The position among the batches this process trains (the steps it pushes) of the
        batch ``batch_index`` (``epoch * num_global_batches + i``; a rank that skips the
        last global batch yields ``len()`` batches an epoch, its ``i``-th at position ``i``)."""
        global_batches, own = self._per_epoch
        return batch_index // global_batches * own + batch_index % global_batches

    def _batch_index(self, ordinal: int) -> int:
        """The ``batch_index`` of this process's ``ordinal``-th batch (inverse of :meth:`_ordinal`)."""
        global_batches, own = self._per_epoch
        return ordinal // own * global_batches + ordinal % own

    # ------------------------------------------------------------------ state and counters
    def stats(self) -> Dict[str, object]:
        """Hot ratio, rows reused and in-edges not sampled per batch (for NS exactly the edges
        saved), the feature bytes that saves at most, the oldest rows inserted (in steps);
        with ``hotness="super_batch"`` the hot set's mean size; with an ItemSampler upstream
        the seconds per batch spent sampling the super-batches' upper layers again to find
        their hot sets (:meth:`super_batch_hot_set`)."""
        batches = max(self._batches, 1)  # every per-batch counter is 0 until the first batch is counted
        return {
            "hot ratio": round(self.hot_ratio, 4),
            "rows reused/batch": round(self._reused / batches, 1),
            "hot rows computed/batch": round(self._computed / batches, 1),
            "edges skipped/batch": round(self._edges_skipped / batches, 1),
            # each skipped edge could have brought one more row of the bottom layer's input
            "feature MB skipped/batch (at most)": round(self._edges_skipped * self._row_bytes / batches / 1e6, 3),
            "reused age max": self._age_max,
            **({"hot vertices/super-batch": round(self._counted_hot / max(self._counted, 1), 1)} if self.counted else {}),
            **({"counting s/batch": round(self._counting_seconds / batches, 4)} if self._reads_batches else {}),
        }

    def reset_stats(self) -> None:
        self._batches = self._reused = self._computed = self._edges_skipped = self._age_max = 0
        self._counted = self._counted_hot = 0
        self._counting_seconds = 0.0

    def count_skipped(self, edges: int) -> None:
        """Record in-edges the bottom layer did not sample for hot destinations."""
        self._edges_skipped += edges

    def state_options(self) -> Dict[str, object]:
        """The options deciding the rows a sampler gets, as plain data: ``super_batch``, the
        hot ratio and the hot set (``"super_batch"``: counted per super-batch; else the number
        of hot vertices and a SHA-256 of their ids, so other scores at the same ratio differ)."""
        hot = "super_batch" if self.counted else f"{self.hot.numel()} vertices, sha256 {self._hot_digest}"
        return {"super_batch": self.super_batch, "hot_ratio": self.hot_ratio, "hot": hot}

    def state_dict(self) -> Dict:
        """The version counter, the kept weights and :meth:`state_options` (save it with the
        model and optimizer)."""
        with self._changed:
            weights = {v: dict(w) for v, w in self._weights.items()}
            return {"options": self.state_options(), "version": self.version, "weights": weights}

    def load_state_dict(self, state: Dict) -> None:
        """Resume from ``state`` (:meth:`state_dict` of a HotReuse built the same way: the same
        bottom layer, hotness, ``hot_ratio`` and ``super_batch``); a ValueError says what does not
        fit, and nothing changes."""
        version, weights = self._checked_state(state)
        with self._changed:
            self.version, self._weights = version, weights
            self._supers.clear()
            self._changed.notify_all()

    def _checked_state(self, state) -> Tuple[int, Dict[int, Dict[str, torch.Tensor]]]:
        """``state``'s version and weights by version, checked against this HotReuse."""
        where, keys = "HotReuse.load_state_dict", ["options", "version", "weights"]
        if not isinstance(state, dict):
            raise TypeError(f"{where}: `state` must be a dict from HotReuse.state_dict(), got {type(state).__name__}")
        if sorted(state, key=str) != keys:
            raise ValueError(f"{where}: `state` must have the keys {keys} (a HotReuse.state_dict()), got {sorted(state, key=str)}")
        mine = self.state_options()
        if state["options"] != mine:
            theirs = state["options"] if isinstance(state["options"], dict) else {}
            differ = [f"{k} {theirs.get(k, 'missing')!r} (this one's {v!r})" for k, v in mine.items() if theirs.get(k) != v]
            differ += [f"{k} {v!r} (this one has none)" for k, v in theirs.items() if k not in mine]
            raise ValueError(
                f"{where}: the state is from another HotReuse ({'; '.join(differ)}): resume with "
                f"one built as the state's was (the same hotness scores, hot_ratio and super_batch)"
            )
        version = check_int(state["version"], "state['version']", where, minimum=0)
        if not isinstance(state["weights"], dict):
            raise TypeError(f"{where}: state['weights'] must be a dict {{version: the bottom layer's state_dict}}, got {type(state['weights']).__name__}")
        weights, n = {}, self.super_batch
        for key, kept in state["weights"].items():
            v = as_int(key)
            if v is None or not 0 <= v <= version:
                raise ValueError(f"{where}: state['weights'] has version {key!r}, not an int in [0, state['version'] = {version}]")
            if v % n:
                raise ValueError(
                    f"{where}: state['weights'] has version {v}, not a multiple of super_batch={n} (a state of a HotReuse "
                    f"with another super_batch?)"
                )
            differ = self._differences(kept) if isinstance(kept, dict) else f"a {type(kept).__name__}, not a state_dict"
            if differ:
                raise ValueError(f"{where}: state['weights'][{v}] is not the bottom layer HotReuse was built with: {differ}")
            weights[v] = dict(kept)
        needed = max(0, (version // n - 1) * n)
        if needed not in weights:
            raise ValueError(
                f"{where}: state['weights'] lacks version {needed}, which the batches after {version} steps reuse "
                f"(it has {sorted(weights)})"
            )
        return version, weights

    def _differences(self, state: Dict) -> str:
        """How a state_dict's entries differ from the bottom layer's (names and shapes); empty if not."""
        shapes = {k: tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__ for k, v in state.items()}
        differ = [f"{k} {shapes.get(k, 'missing')} (built with {self._shapes.get(k, 'none')})"
                  for k in sorted(shapes.keys() | self._shapes.keys()) if shapes.get(k) != self._shapes.get(k)]
        return f"{', '.join(differ[:3])}{', ...' if len(differ) > 3 else ''}"

    def __getstate__(self):
        raise TypeError(
            "HotReuse cannot be pickled: the training loop pushes weights to it in this process; run the "
            "sampler in threads (the DataLoader's default), not worker processes"
        )

    def __repr__(self) -> str:
        hot = f"{self.hot_ratio:.1%} of each super-batch's" if self.counted else f"{self.hot.numel()} ({self.hot_ratio:.1%})"
        return f"HotReuse(hot={hot}, super_batch={self.super_batch}, version={self.version})"


class _SuperBatch:
    """One super-batch's hot set and hot rows: a copy of the bottom layer with its version's
    weights, its hot set (``[H]`` ascending ids, set by the first of its batches), their rows
    (``[H, d]``), the bottom module's output they are (with its autograd graph) and the
    gradient its batches sent back (``[H, d]``)."""

    def __init__(self, module: torch.nn.Module, version: int):
        self.module, self.version = module, version
        self.hot = None
        self.rows = torch.empty(0)
        self.out = self.grad = None
        self.lock = threading.Lock()

    def add(self, out: torch.Tensor) -> None:
        """The bottom module's output ``out`` ``[H, d]`` for the hot set, in its order."""
        self.out, self.rows, self.grad = out, out.detach(), torch.zeros_like(out.detach())

    def accumulate(self, index: torch.Tensor, grad: torch.Tensor) -> None:
        """``grad`` (a batch's, for rows ``index``) into the gradient sent back (a hook:
        returning nothing keeps ``grad``)."""
        self.grad.index_add_(0, index.cpu(), grad.cpu().to(self.grad))


def _shapes(state: Dict[str, torch.Tensor]) -> Dict[str, Tuple[int, ...]]:
    """The shape of each entry of a module's state_dict (parameters and buffers)."""
    return {k: tuple(v.shape) for k, v in state.items()}


def _snapshot(state: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """A CPU copy of a module's state_dict, detached."""
    return {k: v.detach().to("cpu", copy=True) for k, v in state.items()}

