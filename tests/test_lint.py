"""The template's own code is linted like the apps it generates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from renders import ROOT, TEMPLATE, run

RUFF = str(Path(sys.executable).with_name("ruff"))


@pytest.mark.parametrize("where", [ROOT, TEMPLATE], ids=["repo", "template-python"])
@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]], ids=["check", "format"])
def test_ruff(where, args):
    run([RUFF, *args], cwd=where)


def test_scripts_are_executable():
    for script in ("uv", "demo", "test", "relock", "benchmark"):
        assert (ROOT / "scripts" / script).stat().st_mode & 0o111, script
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111


def test_app_lock_has_no_local_paths_indexes_or_cutoff():
    sys.path.insert(0, str(ROOT / "scripts"))
    from check_lock import lock_problems

    assert lock_problems(TEMPLATE / "uv.lock") == []


def test_lock_check_catches_what_a_deploy_cannot_install(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    from check_lock import lock_problems

    # The template's lock has no [options] table, so one can be added after its header keys.
    header, packages = (TEMPLATE / "uv.lock").read_text().split("\n[[package]]", 1)
    bad = header + '\n[options]\nexclude-newer = "2026-01-01T00:00:00Z"\n\n[[package]]' + packages
    bad += '\n[[package]]\nname = "local-thing"\nversion = "0.1.0"\nsource = { path = "/home/me/local-thing" }\n'
    lock = tmp_path / "uv.lock"
    lock.write_text(bad)
    problems = lock_problems(lock)
    assert "options.exclude-newer is set" in problems
    assert any(problem.startswith("local-thing comes from") for problem in problems)


MAX_MODULE_LINES = 320  # small modules with one job each; the offline model has one concern a module


def test_every_app_module_outside_the_offline_model_is_small():
    agent_server = TEMPLATE / "agent_server"
    long = {
        str(path.relative_to(agent_server)): lines
        for path in sorted(agent_server.rglob("*.py"))
        if "offline" not in path.relative_to(agent_server).parts
        and (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split these modules (at most {MAX_MODULE_LINES} lines each)"
