"""The generated app's README starts with the owner's work and stays short, for every answer: at most 250 lines,
`agent_server/agent.py` named within its first 40. The reference lives in docs/, one topic a file: each docs file
is linked from the README, and every link of the README and the docs leads to a file (and heading) that exists.
The README's examples of "Your code" (a tool, one that asks first, MCP servers, a guardrail, history rules), put
into agent.py as an owner would, work on the offline model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from renders import MATRIX, clean_env, render, uv

MAX_LINES = 250
LINK = re.compile(r"\]\(([^()\s]+)\)")
# Answers the session's renders leave out: long-term memory on, and a name as long as the validator allows.
MORE = {"long-term-memory": {"long_term_memory": True, "memory": "postgres", "app_name": "a" * 29 + "b"}}


@pytest.fixture(scope="module")
def more_renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {name: render(tmp_path_factory.mktemp("readme") / name, data) for name, data in MORE.items()}


def app_of(name: str, renders: dict[str, Path], more_renders: dict[str, Path]) -> Path:
    return renders[name] if name in MATRIX else more_renders[name]


def links(page: Path) -> list[str]:
    """The targets of the page's markdown links, outside code blocks."""
    prose = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return LINK.findall(prose)


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto: ...: not this app's
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and anchor not in anchors(linked)):
            broken.append(target)
    return broken


@pytest.mark.parametrize("name", [*MATRIX, *MORE])
def test_the_readme_is_short_and_starts_with_the_owners_agent(renders, more_renders, name):
    lines = (app_of(name, renders, more_renders) / "README.md").read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"the README has {len(lines)} lines: move reference text to docs/"
    assert any("agent_server/agent.py" in line for line in lines[:40]), "name agent_server/agent.py in the first 40"
    headings = [line for line in lines if line.startswith("## ")]
    order = ["## Quick start", "## Your code", "## Test and evaluate", "## Deploy", "## Update", "## Reference"]
    assert [heading for heading in headings if heading in order] == order, headings


def test_the_page_look_section_names_both_files_databricks_apps_reads(renders):
    """A bundle deploy sends databricks.yml's app config, not app.yaml: a CHAT_* setting goes into both, or the app's
    own test_app_yaml_and_the_bundle_config_agree fails (and a bundle deploy would not get the look)."""
    readme = (renders["defaults"] / "README.md").read_text()
    section = readme.split("### The chat page's look", 1)[1].split("\n#", 1)[0]
    assert "`app.yaml`" in section and "`databricks.yml`" in section, section
    assert "tests/template/test_deploy_config.py" in section, section


@pytest.mark.parametrize("name", ["defaults", "no-ci", "long-term-memory"])
def test_every_docs_file_is_linked_from_the_readme_and_every_link_resolves(renders, more_renders, name):
    app = app_of(name, renders, more_renders)
    readme = app / "README.md"
    docs = sorted((app / "docs").glob("*.md"))
    assert len(docs) >= 10
    linked = {(app / target.partition("#")[0]).resolve() for target in links(readme)}
    assert [doc.name for doc in docs if doc.resolve() not in linked] == [], "link each docs file from the README"
    for page in [readme, *docs]:
        assert broken_links(page) == [], page.name


def test_a_docs_file_nobody_links_and_a_broken_link_are_caught(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A title\n\nSee [b](b.md), [the top](#a-title) and [x](#nowhere).\n")
    (tmp_path / "docs" / "b.md").write_text("# B\n")
    (tmp_path / "README.md").write_text("# App\n\n- [docs/a.md](docs/a.md)\n```\n[c](docs/c.md)\n```\n")
    assert broken_links(tmp_path / "docs" / "a.md") == ["#nowhere"]
    assert links(tmp_path / "README.md") == ["docs/a.md"]


# The README's examples of "Your code", put into a fresh app's agent.py as an owner would, then a chat with each.
PROBE = """
import json, sys
from fastapi.testclient import TestClient
from agent_server import mcp_servers
from agent_server.app import app

declared = {"mcp_servers": mcp_servers}
exec(open(sys.argv[1]).read(), declared)  # the README's MCP_SERVERS: specs the app accepts (not connected here)
history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(60)]
with TestClient(app, base_url="http://localhost") as client:
    def send(items):
        return client.post("/invocations", json={"input": items}).json()
    said = {name: send([{"role": "user", "content": text}]) for name, text in [
        ("tool", "lookup_order 1234?"), ("asks", "Please cancel_order 7"), ("guardrail", "What is my password?")]}
    said["history"] = send([*history, {"role": "user", "content": "And now?"}])
print(json.dumps({"said": said, "mcp": [spec.name for spec in declared["MCP_SERVERS"]]}))
"""


def test_the_readmes_examples_of_your_code_run_on_the_offline_model(tmp_path):
    app = render(tmp_path / "app", {})
    yours = (app / "README.md").read_text().split("## Your code", 1)[1].split("\n## ", 1)[0]
    tool, asks, mcp, guardrail, history = re.findall(r"```python\n(.*?)```", yours, re.DOTALL)
    agent = app / "agent_server" / "agent.py"
    code = agent.read_text().replace("\ndef create_agent()", f"\n{tool}\n\n{asks}\n\n{guardrail}\n\ndef create_agent()")
    code = code.replace("tools=[get_current_time, send_summary],", "tools=[get_current_time, send_summary, "
                        "lookup_order, cancel_order],\n        input_guardrails=[no_passwords],")  # fmt: skip
    agent.write_text(re.sub(r"\ndef customize_history\(.*", "\n" + history, code, flags=re.DOTALL))
    (tmp_path / "readme_mcp_servers.py").write_text(mcp)
    (tmp_path / "probe.py").write_text(PROBE)
    uv("sync", "--locked", "--no-config", cwd=app)
    env = clean_env(MEMORY_DATABASE_URL=str(tmp_path / "conversations.db"), MLFLOW_TRACE_SAMPLING_RATIO="0")
    env |= {"MLFLOW_TRACKING_URI": f"file:{tmp_path / 'mlruns'}"}
    probe = [str(tmp_path / "probe.py"), str(tmp_path / "readme_mcp_servers.py")]
    result = uv("run", "--locked", "--no-config", "python", *probe, cwd=app, env=env)
    found = json.loads(result.stdout.strip().splitlines()[-1])
    said = found["said"]
    assert found["mcp"] and len(found["mcp"]) == 2
    tool_output = [item for item in said["tool"]["output"] if item["type"] == "function_call_output"]
    assert tool_output and "shipped yesterday" in tool_output[0]["output"], said["tool"]
    assert [item["name"] for item in said["asks"]["output"] if item["type"] == "mcp_approval_request"] == [
        "cancel_order"
    ], said["asks"]
    assert said["guardrail"]["custom_outputs"]["guardrail"] == "no_passwords"
    assert "I can't help with passwords." in json.dumps(said["guardrail"]["output"])
    # 61 items: the last 40 from a user message are 20 user and 19 assistant turns.
    assert "I saw 20 user, 19 assistant and 0 tool turns" in json.dumps(said["history"]["output"]), said["history"]
