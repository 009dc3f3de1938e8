"""The serving benchmark's own parts, cheaply (the benchmark itself is `scripts/benchmark serve`, never a test):
the stub model answers chat completions and Responses, streaming and not, with bodies the `openai`
package's own types accept, and the /proc readers read a real process."""

from __future__ import annotations

import collections
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from renders import ROOT, clean_env, load_module, run, uv
from servers import ServerProcess, free_port

STUB = ROOT / "benchmarks" / "stub_model.py"
sys.path.insert(0, str(ROOT / "benchmarks"))  # the benchmarks import each other by name, as scripts do
serve = load_module("benchmark_serve", ROOT / "benchmarks" / "serve.py")
import sections  # noqa: E402
import serve_profile  # noqa: E402
import serve_report  # noqa: E402
import served_app  # noqa: E402
import stub_model  # noqa: E402

# Run with the app's Python, which has the openai package the app talks to the model with.
VALIDATE = """
import json, sys
import httpx
from openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

base = sys.argv[1]
history = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello"},
    {"role": "user", "content": "?"},
]

def events(text):
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ") and line != "data: [DONE]"]

with httpx.Client(base_url=base, trust_env=False) as client:
    chat = {"model": "stub", "messages": history}
    completion = ChatCompletion.model_validate(client.post("/chat/completions", json=chat).json())
    assert completion.choices[0].message.content == sys.argv[2], completion
    usage = {"stream_options": {"include_usage": True}}
    streamed = client.post("/chat/completions", json={**chat, "stream": True, **usage})
    assert streamed.headers["content-type"] == "text/event-stream" and streamed.text.endswith("data: [DONE]\\n\\n")
    chunks = [ChatCompletionChunk.model_validate(event) for event in events(streamed.text)]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == sys.argv[2]
    assert chunks[-1].usage is not None and not chunks[-1].choices

    responses = {"model": "stub", "input": history}
    response = Response.model_validate(client.post("/responses", json=responses).json())
    assert response.output_text == sys.argv[2], response
    streamed = client.post("/responses", json={**responses, "stream": True})
    parsed = [TypeAdapter(ResponseStreamEvent).validate_python(event) for event in events(streamed.text)]
    assert parsed[-1].type == "response.completed" and parsed[-1].response.output_text == sys.argv[2]

    stats = client.get(base.removesuffix("/v1") + "/stats").json()
    assert stats == {"calls": {"chat json": 1, "chat stream": 1, "responses json": 1, "responses stream": 1},
                     "input_sizes": {"3": 4}}, stats

# And the real client reads them too.
model = OpenAI(base_url=base, api_key="stub", http_client=httpx.Client(trust_env=False))
assert model.chat.completions.create(model="stub", messages=history).choices[0].message.content == sys.argv[2]
with model.responses.stream(model="stub", input=history) as stream:
    assert stream.get_final_response().output_text == sys.argv[2]
print("ok")
"""


@pytest.fixture(scope="module")
def stub_url() -> Iterator[str]:
    port = free_port()
    args = [sys.executable, str(STUB), "--port", str(port), "--max-seconds", "300"]
    with ServerProcess(args, clean_env(), f"http://127.0.0.1:{port}/health", timeout=30) as stub:
        yield f"{stub.url}/v1"


def test_stub_model_answers_as_the_openai_types_say(renders, stub_url: str) -> None:
    app = renders["defaults"]
    uv("sync", "--locked", "--no-config", cwd=app)
    result = run([str(app / ".venv" / "bin" / "python"), "-c", VALIDATE, stub_url, stub_model.REPLY], cwd=app)
    assert result.stdout.strip() == "ok"


def test_cpu_and_memory_readers_read_a_real_process() -> None:
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    process = subprocess.Popen([sys.executable, "-c", burn], env=clean_env())
    try:
        started = time.monotonic()
        while served_app.cpu_seconds(process.pid) < 0.3 and time.monotonic() - started < 20:
            time.sleep(0.05)
        used = served_app.cpu_seconds(process.pid)
        assert 0.28 <= used <= time.monotonic() - started + 0.1, used
        assert served_app.peak_rss_kib(process.pid) > 1000  # a Python process holds a few MiB at least
    finally:
        process.kill()
        process.wait()


def test_its_section_of_results_is_replaced_and_the_others_kept(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\n## History render\n\nold render\n")
    sections.replace_section(results, f"{serve.HEADING}\n\nfirst\n", serve.HEADING)
    sections.replace_section(results, f"{serve.HEADING}\n\nsecond\n", serve.HEADING)
    assert (
        results.read_text() == f"# Benchmark results\n\n## History render\n\nold render\n\n{serve.HEADING}\n\nsecond\n"
    )
    results.write_text(f"# Benchmark results\n\n{serve.HEADING}\n\nold\n\n## Later\n\nkept\n")
    sections.replace_section(results, f"{serve.HEADING}\n\nnew\n", serve.HEADING)
    assert results.read_text() == f"# Benchmark results\n\n{serve.HEADING}\n\nnew\n\n## Later\n\nkept\n"


def test_profile_summary_groups_frames_by_package() -> None:
    site = "/app/.venv/lib/python3.11/site-packages"
    raw = (
        f"run (/usr/lib/python3.11/asyncio/runners.py:1);call ({site}/starlette/routing.py:2);"
        f"run ({site}/agents/run.py:3);_transform ({site}/openai/_utils/_transform.py:4) 3\n"
        f"run (/usr/lib/python3.11/asyncio/runners.py:1);handle (/app/agent_server/handlers.py:5) 1\n"
    )
    total, packages, functions = serve_profile.summarise_profile(raw)
    shares = {name: (own, inclusive) for name, own, inclusive in packages}
    assert total == 4
    assert shares["openai"] == (75.0, 75.0) and shares["agent_server"] == (25.0, 25.0)
    assert shares["uvicorn/starlette/fastapi"] == (0.0, 75.0) and shares["asyncio"] == (0.0, 100.0)
    assert functions[0] == ("openai", "_transform (openai/_utils/_transform.py)", 75.0)
    assert serve_profile.inclusive_functions(raw, "agents") == [("run (agents/run.py)", 75.0)]


def fake_runs(cpu: dict[tuple[str, str], list[float]]) -> list[dict]:
    """Runs of cells whose CPU per request is cpu[app key, mode][index] at c=8 with tracing off, and 5 ms elsewhere."""
    runs = []
    for index in range(3):
        cells = {}
        for (key, mode), per_run in cpu.items():
            for tracing in serve_report.TRACING:
                for concurrency in served_app.CONCURRENCY:
                    chosen = tracing == "off" and concurrency == 8
                    cells[key, tracing, mode, concurrency] = served_app.Cell(
                        cpu_ms=per_run[index] if chosen else 5.0,
                        rps=100.0,
                        p50=10.0,
                        p95=20.0,
                        p99=30.0 + index,
                        done=400,
                        errors=collections.Counter({"HTTP 500": 1} if key == "C" and index == 0 else {}),
                        rss_mib=200.0,
                    )
        runs.append(cells)
    return runs


def serve_report_of(apps: list, runs: list[dict]) -> str:
    for app in apps:
        app.python, app.versions = "3.11.7", {name: "1.0" for name in served_app.VERSIONS}
    meta = {"command": "scripts/benchmark serve", "date": "2026-12-06", "minutes": 9.0}
    meta |= {"load_before": "1.0 1.0 1.0", "load_after": "1.0 1.0 1.0"}
    settings = served_app.Settings.make(quick=False, runs=3)
    checks = {("stored", "B"): [0, 0, 0], ("stored", "C"): [0, 0, 0], ("traces", "A", "on"): [(450, 450)]}
    return serve_report.report(apps, runs, settings, checks, None, meta)


def test_the_serving_report_sets_head_beside_the_release_and_the_commit_before_the_change() -> None:
    apps = [served_app.App(key, f"app {key}", Path(f"/apps/{key}")) for key in "ABC"]
    apps[1].memory = apps[2].memory = "as rendered"
    # Ratios are taken run by run, then their median: B/A 0.60, 0.65, 0.90 -> 0.65; B/C 0.90, 1.30, 0.95 -> 0.95.
    runs = fake_runs(
        {
            ("A", "json"): [10.0, 10.0, 10.0],
            ("B", "json"): [6.0, 6.5, 9.0],
            ("C", "json"): [6.0 / 0.9, 5.0, 9.0 / 0.95],
            ("A", "stream"): [10.0, 10.0, 10.0],
            ("B", "stream"): [7.0, 7.5, 8.0],
            ("C", "stream"): [7.0, 7.0, 8.0],
        }
    )
    text = serve_report_of(apps, runs)
    assert "- A: app A\n- B: app B\n- C: app C\n" in text
    table = [line for line in text.splitlines() if line.startswith("| ")]
    header = [
        cell.strip() for cell in next(line for line in table if line.startswith("| mode |")).strip("|").split("|")
    ]
    assert header[3:8] == ["CPU ms/req A", "CPU ms/req B", "CPU ms/req C", "CPU ratio B/A", "CPU ratio B/C"]
    assert "errors A / B / C" in header and "peak RSS MiB C" in header
    row = next(line for line in table if line.startswith("| not streaming | 8 | off |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[3:8] == ["10.00", "6.50", "6.67", "0.65×", "0.95×"]
    assert cells[header.index("errors A / B / C")] == "0 / 0 / 1"
    assert (
        "Target (B at most 0.7× A's CPU per request, and below C's), at c=8 with tracing off: "
        "not streaming: CPU/request B/A 0.65× (met), B/C 0.95× (met), p99 31 ms; "
        "streaming: CPU/request B/A 0.75× (not met), B/C 1.00× (not met), p99 31 ms." in text
    )
    assert "| C | stream | 7.00 | 5.00 |" in text  # what tracing costs, for C too
    assert "A, B, C in odd runs, C, B, A in even ones" in text
    assert "conversation items stored: B 0, C 0 (memory as rendered)" in text
    assert [app.key for app in serve.cell_order(apps, 0)] == ["A", "B", "C"]
    assert [app.key for app in serve.cell_order(apps, 1)] == ["C", "B", "A"]


def test_the_serving_report_of_two_apps_has_no_third_column() -> None:
    apps = [served_app.App(key, f"app {key}", Path(f"/apps/{key}")) for key in "AB"]
    runs = fake_runs({(key, mode): [10.0 if key == "A" else 7.0] * 3 for key in "AB" for mode in served_app.MODES})
    text = serve_report_of(apps, runs)
    assert "C" not in [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ")]
    assert "B/C" not in text and "below C" not in text
    assert "not streaming: CPU/request B/A 0.70× (met), p99 31 ms" in text
    assert "A first in odd runs, B first in even ones" in text
    assert "(warm-up included)." in text  # neither kept memory, so no stored items to count


suite = load_module("benchmark_test_suite", ROOT / "benchmarks" / "test_suite.py")

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.test_a" name="test_fast" time="{fast}" />
<testcase classname="tests.test_a" name="test_slow[x]" time="{slow}" />
<testcase classname="tests.test_b" name="test_broken" time="0.1"><failure message="no" /></testcase>
</testsuite></testsuites>
"""


def suite_run(tmp_path: Path, name: str, fast: float, slow: float):
    report = tmp_path / f"{name}.xml"
    report.write_text(JUNIT.format(fast=fast, slow=slow))
    tests, failed = suite.read_junit(report)
    return suite.SuiteRun(wall_seconds=fast + slow, tests=tests, failed=failed)


def test_the_suite_benchmark_reads_pytest_reports_and_names_the_tests_that_got_slower(tmp_path: Path) -> None:
    before = [suite_run(tmp_path, "a1", fast=1.0, slow=1.0), suite_run(tmp_path, "a2", fast=1.2, slow=1.0)]
    assert before[0].tests == {
        "tests.test_a::test_fast": 1.0,
        "tests.test_a::test_slow[x]": 1.0,
        "tests.test_b::test_broken": 0.1,
    }
    assert before[0].failed == 1
    # Twice as long but only 0.2 s longer is noise; twice as long and 1 s longer is slower.
    after = [suite_run(tmp_path, "b1", fast=2.2, slow=2.0), suite_run(tmp_path, "b2", fast=2.2, slow=2.0)]
    assert suite.slower_tests(before, after) == [
        ("tests.test_a::test_fast", 1.1, 2.2),
        ("tests.test_a::test_slow[x]", 1.0, 2.0),
    ]
    after = [suite_run(tmp_path, "c1", fast=0.4, slow=1.2)]
    assert suite.slower_tests(before, after) == []
    assert suite.common_seconds(before, after) == (3, pytest.approx(2.2), pytest.approx(1.7))


def test_the_suite_benchmark_compares_a_template_test_across_its_move_to_tests_template(tmp_path: Path) -> None:
    before = [suite_run(tmp_path, "a", fast=1.0, slow=1.0)]
    report = tmp_path / "moved.xml"
    report.write_text(JUNIT.format(fast=3.0, slow=1.0).replace('classname="tests.', 'classname="tests.template.'))
    tests, failed = suite.read_junit(report)
    after = [suite.SuiteRun(wall_seconds=4.0, tests=tests, failed=failed)]
    assert suite.slower_tests(before, after) == [("tests.test_a::test_fast", 1.0, 3.0)]


garbage = load_module("benchmark_garbage", ROOT / "benchmarks" / "garbage.py")


def test_the_garbage_benchmark_names_the_cycle_that_keeps_a_run_result() -> None:
    class RunResultStreaming:
        pass

    result = RunResultStreaming()

    def cleanup() -> object:
        return result

    result.cleanup = cleanup  # type: ignore[attr-defined]
    assert cleanup.__closure__ is not None
    found = [result, result.__dict__, cleanup, cleanup.__closure__, cleanup.__closure__[0], object()]
    path = garbage.cycle_through(found, "RunResultStreaming")
    assert path is not None
    assert path.startswith("RunResultStreaming → dict → function ") and path.endswith(
        "→ tuple → cell → RunResultStreaming"
    )
    assert garbage.cycle_through(found, "RunResult") is None
