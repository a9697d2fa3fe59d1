"""The one place graphpipe touches torch's datapipe machinery.

Every stage subclasses :class:`Pipe` and registers a functional name with
:func:`functional_pipe`, so users chain stages as a sentence::

    ItemSampler(items, 1024).sample_neighbor(graph, [10, 5]).fetch_feature(feats, ["feat"])

and the transforms walk the chain with :func:`traverse`. If torch ever drops
``torch.utils.data.datapipes``, only this module changes.
"""

from torch.utils.data import IterDataPipe, functional_datapipe
from torch.utils.data.graph import traverse_dps

__all__ = ["Pipe", "functional_pipe", "traverse"]

Pipe = IterDataPipe
functional_pipe = functional_datapipe


def traverse(pipe: Pipe) -> dict:
    """The pipe graph rooted at ``pipe``: ``{id: (pipe, {id: (source, {...})})}``."""
    return traverse_dps(pipe)
