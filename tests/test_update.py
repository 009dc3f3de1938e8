"""`copier update` brings template fixes into existing apps and keeps their owners' changes.

Here, the oldest of the versions that tests/update_support.py builds (0.0.1, an app from before the render step and
the update tooling) updates to what HEAD renders, and an app of it gets the render step: its second prompt then
works. tests/test_update_customised.py updates an owner's customised app; tests/test_update_trust.py shows what an
update asks of the owner. Updates run without --trust (unsafe=False); only the one across a migration needs it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from renders import render, rendered_defaults, uv
from template_versions import commit, generate, update
from update_support import COPIER, OWNER_FILES, answers, app_env, assert_no_leftovers, files, relock_and_test

pytestmark = pytest.mark.xdist_group("update")


# --- the previous version updates to HEAD ---------------------------------------------------------


@pytest.mark.parametrize(
    "data", [{}, {"app_name": "support-bot", "llm_api": "responses", "github_ci": False}], ids=["defaults", "custom"]
)
def test_previous_version_updates_to_what_head_renders(versions, tmp_path, data):
    app = generate(tmp_path / "app", versions, "0.0.1", data)
    old = files(app)

    result = subprocess.run(
        [COPIER, "update", "--defaults", "--vcs-ref", "HEAD", str(app)], capture_output=True, text=True
    )  # the CLI, as an owner runs it: no --trust
    assert result.returncode == 0, result.stderr

    assert_no_leftovers(app)
    updated = files(app)
    fresh = files(render(tmp_path / "fresh", data, src=versions, vcs_ref="HEAD"))
    assert answers(app) == answers(tmp_path / "fresh")
    assert answers(app)["_commit"] == "0.1.0"
    for owned in OWNER_FILES:  # rendered once and never touched again
        assert updated.pop(owned) == old[owned], owned
        fresh.pop(owned)
    assert updated.keys() == fresh.keys()
    assert [name for name in updated if updated[name] != fresh[name]] == []


# --- the retrofit: an app from before the render step ---------------------------------------------


SECOND_PROMPT = '''"""Two prompts through the app; the second replays the first answer the way chat UIs do."""
import json
import sys

from fastapi.testclient import TestClient

sys.path.insert(0, "tests/template")
from support import replayed  # noqa: E402

from agent_server.app import app  # noqa: E402

with TestClient(app, base_url="http://localhost") as client:  # a loopback name: the app answers no other
    history = [{"role": "user", "content": "Hello"}]
    first = client.post("/invocations", json={"input": history})
    history += [*replayed(first.json()["output"], "chat_ui"), {"role": "user", "content": "And again"}]
    second = client.post("/invocations", json={"input": history})
print(json.dumps({"first": first.status_code, "second": second.status_code, "body": second.text}))
'''


# With the app's conversation memory (SQLite): `write` keeps a conversation; `read ID` gives it back, and the tools the
# agent calls for "My name is Ada" (long-term memory's `remember` when it is on).
CONVERSATION = '''"""A conversation kept in the app's database, and read back."""
import json
import sys

from fastapi.testclient import TestClient

from agent_server.app import app

with TestClient(app, base_url="http://localhost") as client:
    said = client.post("/invocations", json={"input": [{"role": "user", "content": "My name is Ada"}]}).json()
    conversation = said["custom_outputs"]["session_id"] if sys.argv[1] == "write" else sys.argv[2]
    read = client.get(f"/conversations/{conversation}")
    calls = [item["name"] for item in said["output"] if item["type"] == "function_call"]
    kept = {"conversation": conversation, "status": read.status_code, "items": read.json()["items"], "calls": calls}
print(json.dumps(kept))
'''


def kept_conversation(app: Path, probe: Path, database: Path, *args: str) -> dict:
    env = app_env() | {"MEMORY_BACKEND": "sqlite", "MEMORY_DATABASE_URL": str(database)}
    result = uv("run", "--locked", "--no-config", "python", str(probe), *args, cwd=app, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def as_before_long_term_memory(database: Path) -> None:
    """The database as the release before long-term memory left it: schema version 5, no facts' tables."""
    with sqlite3.connect(database) as connection:
        for trigger in ("agent_memories_added", "agent_memories_removed"):
            connection.execute(f"DROP TRIGGER {trigger}")
        connection.execute("DROP TABLE agent_memories_search")
        connection.execute("DROP TABLE agent_memories")
        connection.execute("DELETE FROM agent_memory_schema WHERE version > 5")
        connection.execute("INSERT INTO agent_memory_schema (version) VALUES (5)")
    connection.close()


def schema_of(database: Path) -> tuple[int, list[str]]:
    with sqlite3.connect(database) as connection:
        version = connection.execute("SELECT max(version) FROM agent_memory_schema").fetchone()[0]
        tables = [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE name = 'agent_memories'")]
    connection.close()
    return version, tables


def second_prompt(app: Path, probe: Path) -> dict:
    result = uv("run", "--locked", "--no-config", "python", str(probe), cwd=app, env=app_env())
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_app_from_before_the_render_step_gets_it_and_its_second_prompt_works(versions, tmp_path):
    """Also: an app with answers and a database from before long-term memory keeps it off, and its conversations."""
    probe = tmp_path / "second_prompt.py"
    probe.write_text(SECOND_PROMPT)
    app = generate(tmp_path / "app", versions, "0.0.1")
    uv("sync", "--locked", "--no-config", cwd=app)

    before = second_prompt(app, probe)
    assert (before["first"], before["second"]) == (200, 500)
    assert "Unhandled item type or structure" in before["body"]
    # A conversation kept in the old app's SQLite database, with that database's schema from before long-term
    # memory; and answers from before its copier question (absent: an update keeps it off).
    kept, database = tmp_path / "kept_conversation.py", tmp_path / "conversations.db"
    kept.write_text(CONVERSATION)
    written = kept_conversation(app, kept, database, "write")
    assert written["status"] == 200 and [item.get("role") for item in written["items"]] == ["user", "assistant"]
    as_before_long_term_memory(database)
    answered = (app / ".copier-answers.yml").read_text()
    (app / ".copier-answers.yml").write_text(re.sub(r"(?m)^long_term_memory: .*\n", "", answered))
    assert "long_term_memory" not in answers(app)
    commit(app, "Answers from before long-term memory")

    update(app, "HEAD")
    assert_no_leftovers(app)
    assert "render_each(" in (app / "agent_server/turn/checks.py").read_text()
    assert "customize_history" not in (app / "agent_server/agent.py").read_text(), "the owner's agent.py is kept"

    # The template's tests that lean on agent.py, with an agent.py that predates the hooks.
    # (The customised app above runs the whole suite.)
    output = relock_and_test(
        app, "tests/template/test_owner_hooks.py", "tests/template/test_multiturn.py",
        "tests/template/test_regression.py",
    )  # fmt: skip
    assert "test_owner_hooks.py" in output
    after = second_prompt(app, probe)
    assert (after["first"], after["second"]) == (200, 200), after["body"]
    assert "I saw 2 user, 1 assistant and 0 tool turns. You said: And again" in after["body"]
    # Long-term memory stays off, and the kept conversation is there, intact, on the schema migrated at start-up.
    assert answers(app)["long_term_memory"] is False
    assert rendered_defaults(app)["LONG_TERM_MEMORY"] is False
    read = kept_conversation(app, kept, database, "read", written["conversation"])
    assert (read["status"], read["items"]) == (200, written["items"])
    assert read["calls"] == [], "no remember tool: long-term memory is off"
    version, tables = schema_of(database)
    assert version >= 6 and tables == ["agent_memories"], (version, tables)
