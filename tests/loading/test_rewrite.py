import pytest

from graphpipe import FeatureFetcher, ItemSampler, ItemSet
from graphpipe.pipes import SubgraphSampler, Transform
from graphpipe.loading import Prefetcher
from graphpipe.transforms import consumer_of, find, insert_after, insert_before, replace_stage, stages

from toy_pipes import karate_chain


def _chain_types(pipe):
    return [type(stage).__name__ for stage in reversed(stages(pipe))]


def test_stages_and_find_walk_the_graph_sink_first():
    pipe = karate_chain()
    assert _chain_types(pipe) == ["ItemSampler", "WindowSampler", "FeatureFetcher"]
    assert find(pipe, SubgraphSampler) == [pipe.source]
    assert find(pipe, (ItemSampler, FeatureFetcher)) == [pipe, pipe.source.source]
    assert consumer_of(pipe, pipe.source) is pipe and consumer_of(pipe, pipe) is None


def test_insert_after_copies_the_path_and_leaves_the_user_pipe_alone():
    pipe = karate_chain()
    sampler, fetcher = pipe.source, pipe
    new = insert_after(pipe, sampler, lambda stage: Prefetcher(stage, 3))
    assert _chain_types(new) == ["ItemSampler", "WindowSampler", "Prefetcher", "FeatureFetcher"]
    assert _chain_types(pipe) == ["ItemSampler", "WindowSampler", "FeatureFetcher"]
    assert new is not fetcher and fetcher.source is sampler  # the user's fetcher is untouched
    assert new.source.source is sampler  # upstream of the rewrite is shared, not copied
    assert new.features is fetcher.features and new.source.buffer_size == 3


def test_insert_before_and_replace_stage():
    pipe = karate_chain()
    before = insert_before(pipe, pipe, lambda source: Transform(source, lambda mb: mb))
    assert _chain_types(before) == ["ItemSampler", "WindowSampler", "Transform", "FeatureFetcher"]
    sink = Transform(pipe.source, lambda mb: mb)
    assert replace_stage(pipe, pipe, sink) is sink
    items = ItemSampler(ItemSet(8), batch_size=2)
    replaced = replace_stage(pipe, pipe.source.source, items)
    assert find(replaced, ItemSampler) == [items] and find(pipe, ItemSampler) != [items]


def test_rewriting_a_stage_outside_the_graph_is_an_error():
    pipe = karate_chain()
    stranger = ItemSampler(ItemSet(4), batch_size=2)
    with pytest.raises(ValueError, match=r"ItemSampler is not upstream of the sink through `.source` links"):
        replace_stage(pipe, stranger, stranger)
    with pytest.raises(ValueError, match=r"not upstream of the sink"):
        consumer_of(pipe, stranger)
