# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What the offline model says: computed from the conversation, so it is deterministic."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from agent_server import config
from agent_server.config import OFFLINE_CALL_ID_STYLES
from agent_server.offline import judging
from agent_server.offline.arguments import tool_arguments
from agent_server.offline.media import attachments_of, seen

CALL_ID_STYLES = OFFLINE_CALL_ID_STYLES
OWN_WORDS = "Offline model:"  # its own words in an answer (after a tool's output, when it reports one)


@dataclass(frozen=True)
class Message:
    role: str  # "user", "assistant" or "tool"
    text: str
    attachments: tuple[str, ...] = ()  # its images and files, as media.attachments_of names them


@dataclass(frozen=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Citation:
    """A source the answer cites: a url_citation of the text from `start` to `end`."""

    url: str
    title: str
    start: int
    end: int


@dataclass(frozen=True)
class Answer:
    """What the model says (text, or tool calls) and the numbers its wire formats report."""

    text: str
    tool_calls: tuple[ToolCall, ...]
    digest: str  # ids derive from it, so a replayed request gets the same ids
    input_tokens: int
    output_tokens: int
    reasoning: str = ""  # a summary of its reasoning, when asked to think (as reasoning models stream one)
    ends: str = "completed"  # or "incomplete" (cut at the output-token limit) or "failed", when asked to (`ending`)
    citations: tuple[Citation, ...] = ()  # the sources it cites, when asked to cite one


def chat_answer(body: dict[str, Any]) -> Answer:
    if (schema := judging.requested_schema(body)) is not None:
        return structured_answer(body["messages"], schema)
    tools = {tool["function"]["name"]: tool["function"].get("parameters") for tool in _offered_function_tools(body)}
    said = answer(body["messages"], chat_turns(body["messages"]), tools, body.get("tool_choice") == "required")
    return answered_as(said, body.get("model"))


def responses_answer(body: dict[str, Any]) -> Answer:
    if (schema := judging.requested_schema(body)) is not None:
        return structured_answer(body["input"], schema)
    tools = {tool["name"]: tool.get("parameters") for tool in _offered_function_tools(body)}
    said = answer(body["input"], responses_turns(body["input"]), tools, body.get("tool_choice") == "required")
    return answered_as(said, body.get("model"))


def answered_as(said: Answer, model: Any) -> Answer:
    """The offline model answers under every name, and under a listed one (LLM_MODELS) other than the default, says
    which: the page's picker and the tests show which model a turn ran on, with no credentials. (The default's
    answers stay as they were, which tests and owners' checks compare.)"""
    models = config.settings().models
    if OWN_WORDS not in said.text or model not in models.names or model == models.default:
        return said
    return dataclasses.replace(said, text=said.text.replace(OWN_WORDS, f"Offline model, as {model}:", 1))


def structured_answer(history: str | list[dict[str, Any]], schema: dict[str, Any]) -> Answer:
    """An answer that follows the JSON schema the request asks for, as a judge's (offline/judging.py): read from
    every message, the system's too."""
    said = [history] if isinstance(history, str) else [_content_text(item.get("content")) for item in history]
    text = judging.structured_text(schema, "\n".join(said))
    return Answer(text, (), request_digest(history), token_count(json.dumps(history)), token_count(text))


def _offered_function_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    if body.get("tool_choice") == "none":  # the caller forbade tool calls for this turn
        return []
    return [tool for tool in body.get("tools") or [] if tool["type"] == "function"]


def chat_turns(messages: list[dict[str, Any]]) -> list[Message]:
    """User, assistant-with-text and tool turns of a chat; system and tool-call-only turns don't count."""
    turns = []
    for message in messages:
        role, text = message["role"], _content_text(message.get("content"))
        if role in ("user", "tool") or (role == "assistant" and text):
            turns.append(Message(role, text, attachments_of(message.get("content"))))
    return turns


def responses_turns(items: str | list[dict[str, Any]]) -> list[Message]:
    """The same turns as `chat_turns`, read from Responses input items."""
    if isinstance(items, str):
        return [Message("user", items)]
    turns = []
    for item in items:
        kind, role = item.get("type", "message"), item.get("role")
        if kind == "message" and role in ("user", "assistant"):
            text = _content_text(item["content"])
            if role == "user" or text:
                turns.append(Message(role, text, attachments_of(item["content"])))
        elif kind == "function_call_output":
            turns.append(Message("tool", _content_text(item["output"])))
    return turns


def _content_text(content: Any) -> str:
    """A string content as is; a list of parts as its text parts joined with newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part["text"] for part in content if isinstance(part.get("text"), str))
    return ""


def answer(
    history: Any, turns: list[Message], tools: dict[str, dict[str, Any] | None], tool_required: bool = False
) -> Answer:
    """Call a tool the latest user turn asks for (or the first one, when a tool call is required), with arguments
    its parameters' schema accepts (arguments.py), or describe the conversation. `tools`: parameters by name."""
    tool_names = list(tools)
    digest = request_digest(history)
    last_user = max((i for i, turn in enumerate(turns) if turn.role == "user"), default=-1)
    latest_user_text = turns[last_user].text if last_user >= 0 else ""
    tool_outputs = [turn.text for turn in turns[last_user + 1 :] if turn.role == "tool"]
    tool = None if tool_outputs else requested_tool(latest_user_text, tool_names)
    if tool_required and tool_names:  # as the real API does with tool_choice="required"
        tool = tool or tool_names[0]

    text, tool_calls = "", tuple[ToolCall, ...]()
    if tool is not None:
        count = 2 if re.search(r"\btwice\b", latest_user_text.lower()) else 1
        arguments = tool_arguments(tools.get(tool))
        tool_calls = tuple(ToolCall(_call_id(digest, n), tool, arguments) for n in range(count))
    else:
        counts = {role: sum(turn.role == role for turn in turns) for role in ("user", "assistant", "tool")}
        text = (
            f"{OWN_WORDS} I saw {counts['user']} user, {counts['assistant']} assistant and {counts['tool']} "
            f"tool turns. You said: {latest_user_text}"
        )
        if tool_outputs:
            text = f"The tool returned: {tool_outputs[-1]}. {text}"
        if saw := seen([name for turn in turns for name in turn.attachments]):  # in the whole conversation
            text = f"{text} {saw}"
    if tool_calls and (said := MEMORY_ARGUMENTS.get(tool or "")) is not None:  # the user's words are the argument
        tool_calls = tuple(
            dataclasses.replace(call, arguments=json.dumps({said: latest_user_text})) for call in tool_calls
        )
    # Asked to think, it reasons first, as a reasoning model does: a summary that the user sees folded.
    thinks = not tool_calls and re.search(r"\bthink\b", latest_user_text.lower()) is not None
    reasoning = f"The user asks me to think. They said: {latest_user_text}" if thinks else ""
    text, citations = cited(text, latest_user_text) if text else (text, ())
    spoken = reasoning + text + "".join(call.name + call.arguments for call in tool_calls)
    whole = Answer(
        text, tool_calls, digest, token_count(json.dumps(history)), token_count(spoken), reasoning, citations=citations
    )
    return ending(whole, latest_user_text)


# Asked to, it ends its answer as a real model sometimes does: cut at its output-token limit, halfway through its
# text (a Responses answer `incomplete`, a chat completion's finish_reason "length"), or failed (a Responses answer
# `failed`, a chat completion's 500).
CUT_SHORT = re.compile(r"\bcut (it )?short\b")
FAILS = re.compile(r"\bfail (the|your) (answer|response)\b")


def ending(said: Answer, user_text: str) -> Answer:
    lowered = user_text.lower()
    if FAILS.search(lowered):
        return dataclasses.replace(said, ends="failed")
    if CUT_SHORT.search(lowered) and not said.tool_calls:
        text = said.text[: len(said.text) // 2]
        return dataclasses.replace(said, text=text, output_tokens=token_count(text), ends="incomplete", citations=())
    return said


# Asked to cite ("cite a source", or "cite <address>", any scheme, so that tests can offer the page a hostile one),
# the answer ends with a numbered mark that cites it, as a model with web search does.
CITES = re.compile(r"\bcite\b(?:\s+(\S+:\S+))?", re.IGNORECASE)
CITED_SOURCE = "https://example.com/offline-model"


def cited(text: str, user_text: str) -> tuple[str, tuple[Citation, ...]]:
    asked = CITES.search(user_text)
    if asked is None:
        return text, ()
    url = asked.group(1) or CITED_SOURCE
    marked = f"{text} [1]"
    return marked, (Citation(url, f"The source the offline model cites: {url}", len(text) + 1, len(marked)),)


def _call_id(digest: str, number: int) -> str:
    return f"call_{digest}" if number == 0 else f"call_{digest}_{number}"


def with_call_ids(said: Answer, style: str) -> Answer:
    """The answer as a model server with the given call id style would send it."""
    if style == "unique":
        return said
    fixed = "call_0" if style == "reuse" else ""
    calls = tuple(dataclasses.replace(call, call_id=fixed) for call in said.tool_calls)
    return dataclasses.replace(said, tool_calls=calls)


# Named by the user, the model calls this tool though it is offered none by that name, as real models sometimes
# call a tool they made up.
IMAGINED_TOOL = "imagined_tool"


# Long-term memory's tools (memory/long_term.py), as a user would ask for them, and the argument that takes the words.
REMEMBERS = re.compile(r"\s*(remember\b|my name is\b)")
RECALLS = re.compile(r"what do you know about me|what is my name|what's my name")
MEMORY_ARGUMENTS = {"remember": "fact", "recall": "query"}


def requested_tool(user_text: str, tool_names: list[str]) -> str | None:
    lowered = user_text.lower()
    memory_tool = "remember" if REMEMBERS.match(lowered) else "recall" if RECALLS.search(lowered) else None
    if memory_tool in tool_names:
        return memory_tool
    for name in tool_names:
        if name.lower() in lowered:
            return name
    if IMAGINED_TOOL in lowered:
        return IMAGINED_TOOL
    if "get_current_time" in tool_names and re.search(r"\btime\b", lowered):
        return "get_current_time"
    return None


def request_digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def token_count(text: str) -> int:
    return max(1, len(text) // 4)  # the usual four-characters-a-token estimate


# A real stream sends a delta per token or so. Each costs the app the same work, so a few show every path a stream
# takes (the first delta, the ones after, the end), while a delta per word would make every streamed test and
# demo pay for twenty (benchmarks/RESULTS.md, the offline model against a zero-cost stub).
STREAM_PIECES = 3


def split_for_stream(text: str) -> list[str]:
    """At least two deltas (when the text has two characters) and at most STREAM_PIECES, split between words."""
    words = re.findall(r"\S+\s*|\s+", text)
    if len(words) < 2:
        return [text[: len(text) // 2], text[len(text) // 2 :]] if len(text) >= 2 else [text]
    size = -(-len(words) // STREAM_PIECES)  # words per piece, rounded up
    return ["".join(words[start : start + size]) for start in range(0, len(words), size)]
