"""LangGraph's rule for what runs next, read from a checkpoint's JSON alone."""

from __future__ import annotations

from integrations.langgraph_checkpointer.domain.graph_position import (
    graph_position,
    task_node,
    version_newer,
)

V = "0000000000000000000000000000000{}.0.5"


def position(checkpoint: dict, available: set[str], parent: dict | None = None, paths=()):  # type: ignore[no-untyped-def,type-arg]
    return graph_position(
        checkpoint_id="c",
        checkpoint=checkpoint,
        metadata={"step": 1, "source": "loop"},
        parent=parent,
        available=available,
        interrupt_task_paths=paths,
    )


def test_a_node_runs_next_only_for_an_available_trigger_it_has_not_seen() -> None:
    checkpoint = {
        "channel_versions": {
            "branch:to:a": V.format(3),
            "branch:to:b": V.format(3),
            "x": V.format(3),
        },
        "versions_seen": {"a": {"branch:to:a": V.format(3)}, "b": {"branch:to:b": V.format(2)}},
    }
    # a has seen its trigger's version; b has not; x triggers nothing.
    assert position(checkpoint, {"branch:to:a", "branch:to:b", "x"}).next == ("b",)
    # An unavailable trigger (consumed) starts nothing, however new.
    assert position(checkpoint, {"branch:to:a"}).next == ()


def test_join_and_start_channels_trigger_their_nodes() -> None:
    checkpoint = {"channel_versions": {"join:a+b:c": 2, "__start__": 1}, "versions_seen": {}}
    assert position(checkpoint, {"join:a+b:c", "__start__"}).next == ("__start__", "c")


def test_what_ran_is_what_saw_new_versions_since_the_parent() -> None:
    parent = {"versions_seen": {"__input__": {}, "agent": {"branch:to:agent": V.format(2)}}}
    checkpoint = {
        "channel_versions": {},
        "versions_seen": {
            "__input__": {},
            "agent": {"branch:to:agent": V.format(2)},
            "tools": {"branch:to:tools": V.format(3)},
        },
    }
    assert position(checkpoint, set(), parent).ran == ("tools",)


def test_versions_compare_as_langgraph_compares_them() -> None:
    assert version_newer(10, 9) and version_newer("10", "9")
    assert version_newer(V.format(3), V.format(2)) and not version_newer(V.format(2), V.format(2))
    assert version_newer(V.format(1), None) and not version_newer(None, None)


def test_an_interrupted_task_names_its_node() -> None:
    assert task_node("~__pregel_pull, approve") == "approve"
    assert position({}, set(), paths=["~__pregel_pull, approve"]).interrupted == ("approve",)
