"""Kill a training process mid-epoch, restart it from its last checkpoint, and check that the
batches it then yields are bit-identical to an uninterrupted run's (DataLoader.state_dict /
load_state_dict), under the default transforms, worker processes, LABOR with batch
dependency, DistributedItemSampler on two gloo ranks (cooperative sampling too), and a
link-prediction pipe (node pairs, uniform negatives, seed-edge exclusion) in workers."""

import os
import pickle
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.distributed as dist

from graphpipe.loading.workers import _start_forkserver

pytestmark = pytest.mark.usefixtures("kernels_for_child_processes")  # the children load them from the cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EPOCHS, KILL_AT = 2, 5  # the killed run dies after the 6th batch of epoch 0
WORKER_CONFIGS = ("workers", "link")  # the configs whose loaders have worker processes

SCRIPT = textwrap.dedent(
    """
    import hashlib, os, pickle, signal, sys
    from datetime import timedelta
    import torch
    import graphpipe as gp

    def digest(mb):
        h = hashlib.sha256(str(mb.batch_index).encode())
        tensors = [mb.seeds, mb.labels, mb.input_nodes, *mb.node_features.values()]
        tensors += [t for t in (mb.indexes, mb.compacted_seeds) if t is not None]
        for sg in mb.sampled_subgraphs:
            tensors += [sg.sampled_csc.indptr, sg.sampled_csc.indices, sg.original_edge_ids]
            if sg.edge_weights is not None:
                tensors.append(sg.edge_weights)
        for t in tensors:
            h.update(t.contiguous().numpy().tobytes())
        return h.hexdigest()

    def main(config, mode, workdir, rank, world):
        torch.manual_seed(0)  # the seeds the stages draw (seed=None) are the same after a restart
        if world > 1:
            import torch.distributed as dist
            dist.init_process_group("gloo", init_method="file://" + os.path.join(workdir, "init-" + mode),
                                    rank=rank, world_size=world, timeout=timedelta(seconds=30))
        data = gp.datasets.karate_club()
        items = gp.ItemSet((torch.arange(34), data.labels), names=("seeds", "labels"))
        if config == "link":
            src, dst = data.graph.edge_index()
            items = gp.ItemSet(torch.stack([src, dst], 1), names="seeds")
        cooperative = config == "cooperative"
        if world > 1:
            source = gp.DistributedItemSampler(items, 2, shuffle=True, drop_uneven_inputs=True)
        else:
            source = gp.ItemSampler(items, 3, shuffle=True)
        if config == "labor":
            pipe = source.sample_layer_neighbor(data.graph, [3, 2], batch_dependency=3)
        elif config == "link":
            pipe = source.sample_uniform_negative(data.graph, 2, exclude_existing_edges=True).sample_neighbor(
                data.graph, [3, 2], exclude_seed_edges=True, include_reverse_edges=True)
        else:
            pipe = source.sample_neighbor(data.graph, [3, 2], cooperative=cooperative)
        pipe = pipe.fetch_feature(data.features, ["feat"], cooperative=cooperative)
        loader = gp.DataLoader(pipe, num_workers=2 if config in %(worker_configs)r else 0)
        checkpoint = os.path.join(workdir, f"checkpoint{rank}.pt")
        seen = []
        if mode == "resume":
            saved = torch.load(checkpoint, weights_only=False)
            loader.load_state_dict(saved["loader"])
            seen = saved["seen"]
        while len(seen) < %(epochs)d * len(loader) and loader.state_dict()["epoch"] < %(epochs)d:
            for mb in loader:
                seen.append(digest(mb))
                if mode != "full":  # checkpoint after every step, atomically
                    torch.save({"loader": loader.state_dict(), "seen": seen}, checkpoint + ".tmp")
                    os.replace(checkpoint + ".tmp", checkpoint)
                if mode == "kill" and len(seen) == %(kill_at)d + 1:
                    os.kill(os.getpid(), signal.SIGKILL)
        with open(os.path.join(workdir, f"{mode}{rank}.pkl"), "wb") as f:
            pickle.dump(seen, f)
        loader.close()
        if world > 1:
            os._exit(0)

    if __name__ == "__main__":
        config, mode, workdir, rank, world = sys.argv[1:]
        main(config, mode, workdir, int(rank), int(world))
    """
) % {"epochs": EPOCHS, "kill_at": KILL_AT, "worker_configs": WORKER_CONFIGS}


def _run(script, config, mode, workdir, world):
    """The exit codes of ``world`` new processes running the script. Configs without worker
    processes run it in processes of the fork server graphpipe's worker pools use, started
    the same way (graphpipe preloaded: a new interpreter spends seconds of CPU on imports,
    several ranks at once on 2 cores); each is still a new process with nothing of the
    earlier runs but the files in ``workdir``. With workers: a new interpreter (``python
    train.py``), whose workers rerun nothing of its ``__main__``-guarded code."""
    if config not in WORKER_CONFIGS:
        context = _start_forkserver()  # the one fork server of this process, as graphpipe's worker pools start it
        processes = [context.Process(target=_script_main, args=(config, mode, str(workdir), rank, world)) for rank in range(world)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(300)
        return [process.exitcode for process in processes]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    processes = [
        subprocess.Popen([sys.executable, script, config, mode, str(workdir), str(rank), str(world)], env=env)
        for rank in range(world)
    ]
    return [process.wait(timeout=300) for process in processes]


def _script_main(config, mode, workdir, rank, world):
    """The script's ``main`` in a fork server's process (exits with ``os._exit`` on 2 ranks)."""
    namespace = {"__name__": "train"}
    exec(compile(SCRIPT, "train.py", "exec"), namespace)
    namespace["main"](config, mode, workdir, rank, world)


def _run_here(config, mode, workdir):
    """The script's single-rank run in this process (a child process costs seconds of
    imports), with torch's random state put back afterwards: the stages draw their seeds
    from ``torch.manual_seed(0)`` as in a fresh process, so the run is the same. The killed
    run is always a child process; the two-rank configs also resume in new processes."""
    namespace = {"__name__": "train"}
    exec(compile(SCRIPT, "train.py", "exec"), namespace)
    with torch.random.fork_rng(devices=[]):
        namespace["main"](config, mode, str(workdir), 0, 1)


@pytest.mark.parametrize(
    "config, world",
    [("default", 1), ("workers", 1), ("labor", 1), ("distributed", 2), ("cooperative", 2), ("link", 1)],
)
def test_killed_and_resumed_process_reproduces_an_uninterrupted_run(tmp_path, config, world):
    if world > 1 and not (dist.is_available() and dist.is_gloo_available()):
        pytest.skip("needs torch.distributed with gloo")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    if world == 1:
        _run_here(config, "full", tmp_path)
    else:
        assert _run(script, config, "full", tmp_path, world) == [0] * world
    assert _run(script, config, "kill", tmp_path, world) == [-9] * world  # SIGKILL mid-epoch 0
    if world == 1:
        _run_here(config, "resume", tmp_path)  # a new loader from the checkpoint file alone
    else:
        assert _run(script, config, "resume", tmp_path, world) == [0] * world  # new processes
    for rank in range(world):
        full = pickle.loads((tmp_path / f"full{rank}.pkl").read_bytes())
        resumed = pickle.loads((tmp_path / f"resume{rank}.pkl").read_bytes())
        assert len(full) > KILL_AT + 1 and len(set(full)) == len(full)
        assert resumed == full
