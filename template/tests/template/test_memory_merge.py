# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""Properties of the rule that merges what a client sends with a stored conversation (agent_server/memory/merge.py):
the model sees each turn once, nothing the client sent is lost, and nothing stored is deleted (what a history that
differs replaces is set aside, as an earlier branch), whichever way the client sends it."""

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


@given(conversations, conversations, st.booleans())
def test_nothing_sent_is_lost_nothing_is_seen_twice_and_nothing_stored_is_deleted(stored, sent, replace):
    merged = merge(entries(stored), entries(sent), replace)
    history = seen(merged.history)
    assert history[len(history) - len(sent) :] == keys(sent), "what was sent ends the history, all of it"
    if merged.kind == "new turn":  # only what a client makes, after what is stored
        assert history == keys(stored) + keys(sent) and all(made_by_client(item) for item in sent)
    else:  # the client's history is what the model sees, once
        assert history == keys(sent)
    # The conversation after the turn (before its answer): the stored items it keeps, then what the turn adds.
    kept = stored[: merged.kept] if merged.replaces else stored
    after = keys(kept) + keys([entry.item for entry in merged.new])
    assert after[len(after) - len(sent) :] == keys(sent) or merged.kind == "new turn", "what the model saw is in it"
    if merged.replaces:  # stored items go from the conversation: the whole of it is kept as an earlier branch
        assert merged.kept < len(stored) and keys(stored[: merged.kept]) == after[: merged.kept]
    if merged.kind == "diverged":
        assert any(not made_by_client(item) for item in sent), "only a history with the model's items diverges"


@given(turns(), turns(), WORDS)
def test_an_edited_last_turn_replaces_it_and_the_model_sees_the_edit_once(first, second, edited):
    stored = [*first, *second]
    sent = [*first, {"role": "user", "content": edited + "!"}]  # never equal to the stored turn
    merged = merge(entries(stored), entries(sent))
    assert seen(merged.history) == keys(sent)
    # Two equal turns: what was sent is also a window of the conversation's last turn, and goes on from it.
    assert (merged.kind, merged.kept) == ("diverged", len(first)) or (first == second and merged.kind == "window")


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


def two_turns() -> list[dict]:
    """A two-turn conversation of six items: a plain turn, then a tool turn."""
    return [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi!"},
        {"role": "user", "content": "What time is it?"},
        {"type": "function_call", "call_id": "c", "name": "get_current_time", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "12:00"},
        {"role": "assistant", "content": "Noon."},
    ]


def test_a_sliding_window_continues_the_stored_conversation_and_keeps_its_older_turns():
    """A client that trims its history to its last items (a sliding window) sends a window of the conversation: the
    model sees the window, and the new turn is added after all the stored items."""
    stored = two_turns()
    for window in (stored[1:], stored[3:], stored[5:]):
        sent = [*window, {"role": "user", "content": "And now?"}]
        merged = merge(entries(stored), entries(sent))
        assert merged.kind == "window" and not merged.replaces, window
        assert seen(merged.history) == keys(sent)
        assert [entry.item for entry in merged.new] == [{"role": "user", "content": "And now?"}]


def test_a_history_that_goes_on_from_an_earlier_answer_branches_there():
    """The report's case: a reference to the first answer (resolved to it), then a new message, on two turns. The
    conversation goes on from the first answer; the second turn is set aside (an earlier branch), not deleted."""
    stored = two_turns()
    sent = [stored[1], {"role": "user", "content": "Tell me more"}]
    merged = merge(entries(stored), entries(sent))
    assert (merged.kind, merged.kept) == ("diverged", 2), "the first turn stays; what came after it is set aside"
    assert seen(merged.history) == keys(sent)
    assert [entry.item for entry in merged.new] == [{"role": "user", "content": "Tell me more"}]


def test_a_history_that_shares_nothing_with_the_stored_one_sets_all_of_it_aside():
    stored = two_turns()
    sent = [{"role": "assistant", "content": "Somewhere else"}, {"role": "user", "content": "Hi"}]
    merged = merge(entries(stored), entries(sent))
    assert (merged.kind, merged.kept, merged.new) == ("diverged", 0, entries(sent))


def test_an_edit_keeps_the_turns_before_it_and_sets_aside_the_rest():
    stored = two_turns()
    sent = [*stored[:2], {"role": "user", "content": "What day is it?"}]
    for replace in (False, True):
        merged = merge(entries(stored), entries(sent), replace)
        assert merged.replaces and merged.kept == 2 and [entry.item for entry in merged.new] == sent[2:]
    regenerated = merge(entries(stored), entries(stored[:3]), replace=True)
    assert (regenerated.kind, regenerated.kept, regenerated.new) == ("replaced", 3, [])
    same = merge(entries(stored), entries([*stored, {"role": "user", "content": "More"}]), replace=True)
    assert same.kind == "extends" and not same.replaces, "nothing to set aside"
