# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""What a client sees when something goes wrong (README, "Failure modes"): the right status, one
error shape, and never a 500 for the client's own mistake.

The model's failures come from real servers on loopback ports: one that refuses connections, one
that never answers, one that rate-limits, and the offline model asked to call tools for ever.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
from typing import Any

import loopback
import pytest
from agents import Agent, ModelSettings, function_tool
from fastapi.testclient import TestClient
from starlette.responses import JSONResponse
from support import ServerThread, StartedApp, app_env, free_port

from agent_server import agent, config, errors, llm

HELLO = {"input": [{"role": "user", "content": "Hello"}]}


def assert_error(response, status: int, message: str, param: str | None = None) -> None:
    """The one error shape every failure has: {"error": {message, type, param}, "detail"}."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error", "detail"} and set(body["error"]) == {"message", "type", "param"}, body
    assert message in body["error"]["message"] and body["detail"] == body["error"]["message"]
    assert body["error"]["param"] == param


# --- the client's own mistakes: 4xx, never 500 ---------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"input": [{"role": "user", "content": "\\ud800"}]}', "lone surrogate"),
        (b'{"input": "hi", "custom_inputs": ' + b"[" * 500 + b"]" * 500 + b"}", "nested"),
        (b'{"input": "hi", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nested"),
        (b'{"input": "hi", "n": ' + b"9" * 5000 + b"}", "not valid JSON"),
    ],
    ids=["lone-surrogate", "nested-500-deep", "nested-5000-deep", "5000-digit-integer"],
)
def test_bodies_python_cannot_handle_are_a_400(app_client, raw, message):
    response = app_client.post("/invocations", content=raw, headers={"content-type": "application/json"})
    assert_error(response, 400, message)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param"),
    [
        ("POST", "/invocations", {"input": "hi", "context": "not an object"}, 400, "context"),  # MLflow's request model
        ("GET", "/no-such-page", None, 404, None),
        ("PUT", "/invocations", {}, 405, None),
    ],
    ids=["request-model", "not-found", "wrong-method"],
)
def test_errors_from_the_request_model_and_fastapi_have_the_one_shape_too(
    app_client, method, path, body, status, param
):
    response = app_client.request(method, path, json=body)
    assert_error(response, status, "", param)


def test_previous_response_id_is_refused_with_what_to_send_instead(app_client):
    response = app_client.post("/invocations", json={**HELLO, "previous_response_id": "resp_123"})
    assert_error(response, 400, "cannot be used with this app", "previous_response_id")


def test_too_many_items_or_too_much_text_is_a_413(app_client, app_settings):
    app_settings.setenv("MAX_INPUT_ITEMS", "3")
    app_settings.setenv("MAX_INPUT_CHARS", "50")
    items = {"input": [{"role": "user", "content": "hi"}] * 4}
    assert_error(app_client.post("/invocations", json=items), 413, "MAX_INPUT_ITEMS=3", "input")
    long = {"input": [{"role": "user", "content": "x" * 60}]}
    assert_error(app_client.post("/invocations", json=long), 413, "MAX_INPUT_CHARS=50")


def test_a_body_that_is_not_json_is_a_415(app_client):
    response = app_client.post("/invocations", content=json.dumps(HELLO), headers={"content-type": "text/plain"})
    assert_error(response, 415, "Content-Type: application/json")


@pytest.mark.parametrize("api_mode", ["chat_completions"], indirect=True)
def test_on_behalf_of_user_without_a_user_token_is_a_401(app_client, app_settings, model_log):
    app_settings.setenv("LLM_PROVIDER", "databricks")
    app_settings.setenv("LLM_ON_BEHALF_OF_USER", "true")
    assert_error(app_client.post("/invocations", json=HELLO), 401, "carries no user token")
    assert not model_log
    app_settings.setenv("LLM_ON_BEHALF_OF_USER_FALLBACK", "true")
    assert not llm.needs_user_token(), "the owner may opt in to running such requests as the app"


# --- the model's failures: the status that says why ---------------------------------------------


def test_model_calls_have_a_bounded_timeout_and_retries():
    unset = config.Settings({})
    assert llm.call_limits(unset)["max_retries"] == 2 and llm.call_limits(unset)["timeout"].read == 120
    limits = llm.call_limits(config.Settings({"LLM_TIMEOUT_SECONDS": "5", "LLM_MAX_RETRIES": "0"}))
    assert (limits["timeout"].read, limits["max_retries"]) == (5, 0)
    for bad in ({"LLM_TIMEOUT_SECONDS": "0"}, {"LLM_TIMEOUT_SECONDS": "soon"}, {"LLM_MAX_RETRIES": "-1"}):
        with pytest.raises(llm.ConfigurationError, match=next(iter(bad))):
            llm.call_limits(config.Settings(bad))


@pytest.fixture
def openai_provider(app_settings):
    """LLM_PROVIDER=openai at a given URL, with no retries and a 1 s timeout."""

    def use(url: str) -> TestClient:
        for name, value in {
            "LLM_PROVIDER": "openai",
            "LLM_MODEL": "any-model",
            "LLM_API": "chat_completions",
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "test-key",
            "LLM_MAX_RETRIES": "0",
            "LLM_TIMEOUT_SECONDS": "1",
        }.items():
            app_settings.setenv(name, value)
        from agent_server.app import app

        return TestClient(app)

    return use


@pytest.mark.parametrize("api_mode", ["responses"], indirect=True)
def test_input_the_model_rejects_is_a_400_that_names_the_clients_item(app_client, model_log):
    # The part passes the render (its extra key is kept for the model to judge), and the model rejects it.
    # The reasoning item before it is not replayed, so the model's input[0] is the client's input[1].
    image = {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto", "zoom": 2}
    reasoning = {"type": "reasoning", "summary": [{"type": "summary_text", "text": "hmm"}]}
    response = app_client.post("/invocations", json={"input": [reasoning, {"role": "user", "content": [image]}]})
    assert_error(response, 400, "Unknown parameter: 'input[0].content[0].zoom'", "input[1].content[0].zoom")
    assert [entry["status"] for entry in model_log] == [400]
    model_log.clear()  # the 400 was the point of this test


def test_a_chat_message_index_maps_to_the_item_it_came_from():
    def call(call_id: str) -> dict:
        return {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"}

    items = [
        {"role": "user", "content": "hi"},
        call("a"),
        call("b"),
        {"type": "function_call_output", "call_id": "a", "output": "1"},
        {"type": "function_call_output", "call_id": "b", "output": "2"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"},
    ]
    failure = errors.ModelFailure(model_input=items, system_messages=1)
    sources = [10, 11, 12, 13, 14, 15, 16]  # the client's indexes of those items
    # messages: system, user, assistant with both calls, tool, tool, assistant, user
    expected = {"messages.[1].content": "input[10].content", "messages.[2].role": "input[11].role"}
    expected |= {"messages.[4].content": "input[14].content", "messages.[6]": "input[16]"}
    for param, client in expected.items():
        assert errors.client_param(param, sources, failure) == client
    assert errors.client_param("messages.[0].content", sources, failure) == "messages.[0].content"
    assert errors.client_param("model", sources, failure) == "model"


def test_an_unreachable_model_is_a_502(openai_provider):
    with openai_provider(f"http://127.0.0.1:{free_port()}") as client:  # nothing listens there
        assert_error(client.post("/invocations", json=HELLO), 502, "The model could not be reached")


def test_a_model_that_never_answers_is_a_504(openai_provider):
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with openai_provider(f"http://127.0.0.1:{listener.getsockname()[1]}") as client:
            assert_error(client.post("/invocations", json=HELLO), 504, "did not answer in time")


def test_a_rate_limited_model_is_a_429_with_its_retry_after(openai_provider):
    async def rate_limited(scope, receive, send):
        error = {"error": {"message": "Slow down", "type": "rate_limit_error", "param": None, "code": None}}
        await JSONResponse(error, status_code=429, headers={"retry-after": "7"})(scope, receive, send)

    with ServerThread(rate_limited) as url, openai_provider(url) as client:
        response = client.post("/invocations", json=HELLO)
    assert_error(response, 429, "Slow down")
    assert response.headers["retry-after"] == "7"


def test_a_model_that_keeps_calling_tools_is_a_502_that_says_so(app_client, monkeypatch, model_log):
    looping = agent.create_agent().clone(model_settings=ModelSettings(tool_choice="required"), reset_tool_choice=False)
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: looping)
    assert_error(app_client.post("/invocations", json=HELLO), 502, "Max turns (10) exceeded")
    assert len(model_log) == 10


# --- availability ------------------------------------------------------------------------------


def test_a_stalled_upload_is_a_408(app_settings, api_mode):
    app_settings.setenv("BODY_TIMEOUT_SECONDS", "0.5")
    from agent_server.app import app

    with ServerThread(app) as url, socket.create_connection(url.removeprefix("http://").split(":")) as sock:
        port = url.rsplit(":", 1)[1]
        head = f"POST /invocations HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: 1000\r\n\r\n".encode() + b'{"input": ')  # and nothing more
        sock.settimeout(10)
        answer = http.client.HTTPResponse(sock)
        answer.begin()
        body = json.loads(answer.read())
    assert answer.status == 408, body
    assert "did not arrive within 0.5 s" in body["error"]["message"]


@pytest.mark.parametrize("request_line", ["POST /invocations", "POST /feedback", "PATCH /conversations/some-chat"])
def test_a_body_that_trickles_in_is_a_408_at_its_deadline(app_settings, api_mode, request_line):
    """BODY_TIMEOUT_SECONDS (0.5 s here) bounds the whole body: a byte every 0.3 s never stalls long, and still runs
    out. So do the small bodies: feedback's, a new title's (json_body.py)."""
    app_settings.setenv("BODY_TIMEOUT_SECONDS", "0.5")
    from agent_server.app import app

    with ServerThread(app) as url, socket.create_connection(url.removeprefix("http://").split(":")) as sock:
        port = url.rsplit(":", 1)[1]
        head = f"{request_line} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: 1000\r\n\r\n".encode())
        started = time.monotonic()
        sock.settimeout(0.3)
        answered = b""
        while not answered and time.monotonic() - started < 10:
            sock.sendall(b" ")
            with contextlib.suppress(TimeoutError):
                answered = sock.recv(65536)
    assert answered.startswith(b"HTTP/1.1 408"), answered[:200]
    assert time.monotonic() - started < 5, "the deadline held, though no wait for a chunk ran out"


@pytest.mark.waits
def test_headers_that_trickle_in_are_a_408_and_the_connection_closed(tmp_path):
    """start-app's server gives a request's head BODY_TIMEOUT_SECONDS (2 s here) from its start, however it trickles
    (middleware/head_deadline.py): a byte every 0.25 s for 1.75 s, then the 408 at 2 s, where a clock reset by each
    byte would wait until 3.75 s."""
    with StartedApp(app_env(LLM_PROVIDER="offline", BODY_TIMEOUT_SECONDS="2")) as url:
        with socket.create_connection(url.removeprefix("http://").split(":")) as sock:
            started = time.monotonic()
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            for _ in range(7):
                time.sleep(0.25)
                sock.sendall(b"x")
            sock.settimeout(10)
            answered = b""
            while chunk := sock.recv(65536):  # until the server closes the connection
                answered += chunk
            closed_after = time.monotonic() - started
        assert answered.startswith(b"HTTP/1.1 408"), answered[:200]
        assert b"did not arrive within 2 s" in answered
        assert closed_after < 3.5, closed_after
        assert loopback.get(f"{url}/health").status_code == 200, "a client that sends its head in time is served"


def test_a_client_that_hangs_up_stops_its_request(monkeypatch, api_mode, model_log):
    """A non-streaming request whose client left runs no further tool or model call: its running tool is
    cancelled (it would answer only after 60 s)."""
    ran: list[str] = []
    started, cancelled = threading.Event(), threading.Event()

    async def slow_tool() -> str:
        ran.append("started")
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            ran.append("cancelled")
            cancelled.set()
            raise
        ran.append("finished")
        return "late"

    tool = function_tool(slow_tool, name_override="get_current_time")
    slow = Agent(name="slow", instructions="x", model=llm.model(), tools=[tool])
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: slow)
    from agent_server.app import app

    with ServerThread(app) as url:
        body = json.dumps({"input": "What time is it?"}).encode()
        head = "POST /invocations HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        with socket.create_connection(url.removeprefix("http://").split(":")) as sock:
            sock.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            assert started.wait(30), "the turn reached its tool"  # however long a busy machine takes to get there
        # The client has left while the tool runs.
        assert cancelled.wait(30), "the tool was cancelled when the client left"
    assert ran == ["started", "cancelled"]
    assert len(model_log) == 1, "no model call after the client left"


def test_a_hang_up_cancels_the_turn_in_its_own_task_and_leaves_the_task_uncancelled():
    """routes.until_disconnect serves the turn in the request's task and cancels that task on a hang-up: whether the
    turn stops there or takes the cancel and ends anyway, what runs after it in that task is not cancelled."""
    from agent_server.routes import until_disconnect

    async def hung_up() -> dict[str, str]:
        await asyncio.sleep(0.01)
        return {"type": "http.disconnect"}

    async def sent(message: dict[str, object]) -> None:
        pass

    async def stops(send: object) -> None:
        await asyncio.sleep(10)

    async def ends_anyway(send: object) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(10)

    async def request(serve: Any) -> int:
        await until_disconnect(serve, hung_up, sent)
        await asyncio.sleep(0)  # the request's task goes on, as the middlewares after the route do
        task = asyncio.current_task()
        assert task is not None
        return task.cancelling()

    async def main() -> list[int]:
        return [await asyncio.wait_for(asyncio.ensure_future(request(serve)), 5) for serve in (stops, ends_anyway)]

    assert asyncio.run(main()) == [0, 0]
