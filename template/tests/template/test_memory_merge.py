# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Properties of the rule that merges what a client sends with a stored conversation (agent_server/memory/merge.py):
the model sees each turn once, and nothing the client sent is lost, whichever way the client sends it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agent_server.history import Rendered
from agent_server.memory.merge import comparable, made_by_client, merge

WORDS = st.sampled_from(["hi", "again", "time?", "thanks"])  # few words, so that items often repeat


@st.composite
def turns(draw: st.DrawFn) -> list[dict]:
    """One turn: the user's message, maybe a tool call and its output, the model's answer."""
    call = f"call_{draw(st.integers(0, 3))}"
    tool = [
        {"type": "function_call", "call_id": call, "name": "get_current_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": call, "output": draw(WORDS)},
    ]
    return [
        {"role": "user", "content": draw(WORDS)},
        *(tool if draw(st.booleans()) else []),
        {"role": "assistant", "content": draw(WORDS)},
    ]


conversations = st.lists(turns(), max_size=4).map(lambda ts: [item for turn in ts for item in turn])


def entries(items: list[dict]) -> list[Rendered]:
    return [Rendered(index, item) for index, item in enumerate(items)]


def seen(merged_history: list[Rendered]) -> list[str]:
    return [comparable(entry.item) for entry in merged_history]


def keys(items: list[dict]) -> list[str]:
    return [comparable(item) for item in items]


@given(conversations, WORDS)
def test_a_client_that_resends_everything_adds_only_its_new_turn(stored, text):
    sent = [*stored, {"role": "user", "content": text}]
    merged = merge(entries(stored), entries(sent))
    assert seen(merged.history) == keys(sent), "each stored item once, then the new turn"
    assert keys([entry.item for entry in merged.new]) == keys(sent[len(stored) :]) or not stored


@given(conversations, WORDS)
def test_a_client_that_sends_only_its_new_turn_gets_it_after_the_stored_ones(stored, text):
    sent = [{"role": "user", "content": text}]
    merged = merge(entries(stored), entries(sent))
    assert seen(merged.history) == keys([*stored, *sent])
    assert [entry.item for entry in merged.new] == sent
    assert not merged.replaces


@given(conversations, conversations)
def test_nothing_the_client_sent_is_lost_and_nothing_is_seen_twice(stored, sent):
    merged = merge(entries(stored), entries(sent))
    history = seen(merged.history)
    assert history[len(history) - len(sent) :] == keys(sent), "what was sent ends the history, all of it"
    if merged.kind == "extends":  # the stored conversation is what the client sent first: not seen twice
        assert keys(sent)[: len(stored)] == keys(stored) and history == keys(sent)
    elif merged.kind == "diverged":  # the client's version wins, and it holds the model's items
        assert history == keys(sent) and any(not made_by_client(item) for item in sent)
    elif merged.kind == "new conversation":
        assert not stored and history == keys(sent)
    else:  # a new turn (only what a client makes), after what is stored
        assert history == keys(stored) + keys(sent) and all(made_by_client(item) for item in sent)


@given(turns(), turns(), WORDS)
def test_an_edited_last_turn_replaces_it_and_the_model_sees_the_edit_once(first, second, edited):
    stored = [*first, *second]
    sent = [*first, {"role": "user", "content": edited + "!"}]  # never equal to the stored turn
    merged = merge(entries(stored), entries(sent))
    assert merged.replaces and seen(merged.history) == keys(sent)


def test_re_serialised_tool_arguments_still_extend_the_conversation():
    stored = [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": 1, "b": 2}'},
        {"type": "function_call_output", "call_id": "c", "output": "x"},
        {"role": "assistant", "content": "done"},
    ]
    sent = [*stored[:1], {**stored[1], "arguments": '{"b":2,"a":1}'}, *stored[2:], {"role": "user", "content": "more"}]
    merged = merge(entries(stored), entries(sent))
    assert merged.kind == "extends" and [entry.item for entry in merged.new] == [{"role": "user", "content": "more"}]
