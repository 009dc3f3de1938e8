# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""docs/history-shapes.md, written from the catalogue in tests/template/history_catalogue.yaml:

    uv run python tests/template/history_shapes_doc.py > docs/history-shapes.md

tests/template/test_history_catalogue.py fails when the doc and the catalogue differ.
"""

from __future__ import annotations

import json
from typing import Any

from history_catalogue import MERGES, SHAPES, MergeCase, Shape

from agent_server.history import API_MODES, pair_calls_with_outputs, render_each
from agent_server.memory.merge import merge

HEADER = (
    "<!-- Owned by the template: changes here are overwritten by `copier update`. Generated from "
    "tests/template/history_catalogue.yaml: edit that file, then run "
    "`uv run python tests/template/history_shapes_doc.py > docs/history-shapes.md`. -->"
)
INTRO = """\
# History shapes

Every request to `/invocations` (and `/responses`) carries the conversation, in whatever shape the
client keeps it (with conversation memory on, it may carry only its new turn: see the last section).
`agent_server/history/` renders it into the one form that every supported openai-agents version and
both API modes accept, before MLflow validates the request. This page lists
the shapes real clients send and what the render makes of each; the rules themselves are at the top
of `agent_server/history/`.

Each shape below is test data in `tests/template/history_catalogue.yaml`: `tests/template/test_history_catalogue.py`
renders it in both API modes and sends it, followed by a new user message, through the real server
and SDK to the offline model, streaming and not, and checks that the model got exactly the render
shown here and answered without an error. A shape marked 400 must be rejected before any model call.

A history that a real conversation produced is never rejected: the client would replay it on every
later turn, and the conversation could never go on. What both APIs would refuse as it stands (a call
with no output or two, an output whose call was cut off, reused call ids) is repaired, in the least
surprising way that keeps the model's view true, and each repair is logged at INFO with the item's
index; the "Repairs" section lists every one. Only what no conversation could produce (a wrong JSON
type, an unknown item type, a missing required field) is a 400.

How to read it: **Sent** is the history a client posts as `input` before its next user message.
**Rendered** is what the agent receives (in chat-completions mode the SDK then converts it to
chat messages). **Rejected** is the 400 the endpoint answers, with `param` naming the item.

What to do when a client sends a shape that gets a 400: check that it is listed here as rejected
for a reason that applies to you; if it is a shape your clients really send, add it to
`tests/template/history_catalogue.yaml` with the render you expect, and a rule to `agent_server/history/`.
"""


MODE_NAMES = {"chat_completions": "chat-completions", "responses": "Responses"}


def _json_block(items: list[dict[str, Any]]) -> str:
    lines = ",\n".join(f"  {json.dumps(item)}" for item in items)
    return f"```json\n[\n{lines}\n]\n```"


def _section(shape: Shape) -> str:
    parts = [f"### `{shape.name}`", f"*{shape.client}.* {shape.note}", "**Sent**", _json_block(shape.history)]
    renders = {api: shape.expected(api) for api in API_MODES}
    if renders["chat_completions"] == renders["responses"] and renders["responses"] is not None:
        parts += ["**Rendered**, in both API modes", _json_block(renders["responses"])]
    else:
        for api, rendered in renders.items():
            if rendered is not None:
                parts += [f"**Rendered** in {MODE_NAMES[api]} mode", _json_block(rendered)]
    if shape.error is not None:
        modes = " and ".join(
            {"chat_completions": "chat-completions", "responses": "Responses"}[m] for m in shape.error_modes
        )
        parts += [f"**Rejected** in {modes} mode: 400 `{shape.error}...`"]
    return "\n\n".join(parts)


def _outcome(shape: Shape) -> str:
    if shape.error is None:
        return "repaired (logged)" if shape.group == "Repairs" else "rendered"
    if len(shape.error_modes) == 2:
        return "400"
    return f"400 in {' and '.join(MODE_NAMES[mode] for mode in shape.error_modes)} mode, rendered otherwise"


def _index() -> str:
    rows = ["| shape | sent by | result |", "|---|---|---|"]
    rows += [f"| [`{s.name}`](#{s.name}) | {s.client} | {_outcome(s)} |" for s in SHAPES]
    return "\n".join(rows)


MEMORY_INTRO = """\
## Conversation memory: what is sent, and what is stored

With memory on (`agent_server/memory/`), a request names its conversation
(`context.conversation_id` or `custom_inputs.session_id`) and may send only its new turn. The
stored items are the render's, and what the client sent is rendered too; `agent_server/memory/merge.py`
then merges the two by one rule, in this order:

0. **replaced**: the request says that what it sent is the whole conversation
   (`custom_inputs.replace_history: true`, as the chat page's Edit and Regenerate do); the model
   sees what was sent, and it becomes the conversation. Without the flag, an edited first
   message (which holds no item of the model's) would be taken for a new turn.
1. **new conversation**: nothing is stored; the model sees what was sent.
2. **extends**: what was sent starts with the stored conversation (items compared as rendered, tool
   arguments as canonical JSON); the model sees the stored items and the rest of what was sent.
3. **window**: what was sent starts with the stored conversation's last items, one of them the model's (a
   client that trims its history to a sliding window, or refers to the last answer by id); the model sees
   what was sent, and its new items follow all the stored ones.
4. **new turn**: what was sent holds only items a client makes (user, system and developer
   messages, tool outputs, approval answers); the model sees the stored items, then those.
5. **diverged**: anything else: what was sent holds the model's own items but does not continue the
   stored conversation (an edited or regenerated turn, a history that goes on from an earlier answer). The
   model sees what was sent. If it starts with stored items (one of them the model's), the conversation goes
   on from there; otherwise what was sent becomes the conversation.

**No stored turn is deleted by what a client sends.** Whatever a turn replaces (replaced, diverged: the
stored items after the point where what was sent leaves them) is kept, with the whole conversation as it
stood, as an earlier branch (`agent_server/memory/branches.py`): `GET /conversations/{id}` lists them as
`branches`, and `?branch=N` returns one. Only deleting the conversation, `DELETE /me`, `MEMORY_MAX_AGE_DAYS`
and `MEMORY_MAX_ITEMS` (which bounds a conversation's branches too, the oldest dropped first) remove turns.

After the turn, what the model saw and its answer are in the stored conversation, in one transaction; a
turn that fails, or that the client stops, stores nothing. So the model sees each turn once, nothing the
client sent is lost, and nothing stored is. `tests/template/test_memory_merge.py` checks these as properties
over generated histories; `tests/template/test_memory.py` and `test_conversation_branches.py` drive each
client style through the real server.

**Stored** is the conversation before the request (as stored: rendered items), **Sent** the request's
`input`, and **The model sees** the history the agent runs on (before the new turn's answer).
"""


def _merge_section(case: MergeCase) -> str:
    merged = merge(render_each(case.stored), render_each(case.sent))
    seen = [entry.item for entry in pair_calls_with_outputs(merged.history)]
    assert merged.kind == case.kind, f"{case.name}: merged as {merged.kind}, catalogued as {case.kind}"
    parts = [f"### `{case.name}`", f"*{case.client}.* {case.note}"]
    parts += ["**Stored**", _json_block(case.stored) if case.stored else "nothing", "**Sent**", _json_block(case.sent)]
    parts += [f"**Merged as** {case.kind}; **the model sees**", _json_block(seen)]
    return "\n\n".join(parts)


def markdown() -> str:
    sections = [HEADER, INTRO.rstrip(), _index()]
    group = None
    for shape in SHAPES:
        if shape.group != group:
            group = shape.group
            sections.append(f"## {group}")
        sections.append(_section(shape))
    sections.append(MEMORY_INTRO.rstrip())
    sections.extend(_merge_section(case) for case in MERGES)
    return "\n\n".join(sections) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
