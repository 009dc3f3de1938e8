# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""MCP approvals without a server: an approval id signs the user turns and the call (history/approvals.py), and
what the process keeps of the calls it ran is bounded (tools/approved_calls.py). The approvals through the app:
test_mcp_servers.py."""

from __future__ import annotations

import json

from agent_server.history import approvals
from agent_server.tools import approved_calls

from .test_mcp_servers import no_approval_ran_yet  # noqa: F401  (no_approval_ran_yet: autouse, as there)


def test_the_outputs_kept_of_approved_calls_are_bounded_in_characters(monkeypatch):
    """What the process keeps of the calls it ran, to answer a retry without a second run, never grows the app."""
    monkeypatch.setattr(approved_calls, "KEPT_CHARS", 50_000)
    for number in range(10):
        approved_calls.remember((f"mcpr_{number}", ""), "x" * 20_000)
    assert approved_calls._kept_chars <= 50_000 and len(approved_calls._outputs) == 2
    assert list(approved_calls._outputs) == [("mcpr_8", ""), ("mcpr_9", "")], "the newest are kept"


def test_an_approval_id_signs_the_user_turns_and_the_call_however_arguments_are_spelled():
    """And its stamp (when it was made, and a random part): each request the app makes has an id of its own."""
    history = [{"role": "user", "content": "Delete it"}]
    signed = approvals.approval_id(history, "delete_file", '{"name": "a.txt", "force": true}')
    stamp = approvals.stamp_of(signed)
    assert stamp is not None and signed.startswith(approvals.ID_PREFIX + stamp) and len(signed) == 53
    assert approvals.approval_id(history, "delete_file", '{"force":true,"name":"a.txt"}', stamp=stamp) == signed
    in_a_string = json.dumps('{"force":true,"name":"a.txt"}')
    assert approvals.approval_id(history, "delete_file", in_a_string, stamp=stamp) == signed
    assert approvals.approval_id(history, "delete_file", '{"name": "b.txt", "force": true}', stamp=stamp) != signed
    assert approvals.approval_id([{"role": "user", "content": "Other"}], "delete_file", "{}", stamp=stamp) != signed
    assert approvals.approval_id(history, "delete_file", '{"name": "a.txt", "force": true}') != signed, "a new stamp"
