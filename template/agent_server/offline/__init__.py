# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The built-in offline model: an OpenAI-compatible API that runs in process, with no network.

It serves `POST /v1/chat/completions` and `POST /v1/responses`, streaming or not, and is
deterministic, so tests and demos need no credentials. It is also STRICT: every request is
validated the way the real OpenAI API validates it, so a history bug (an unknown key, a
`null` where a string belongs, a tool output without its call) fails offline with the same
400 it would get in production, instead of passing here and failing there.

One concern per module: replies.py (what it says), arguments.py (what it calls a tool with), judging.py (its
verdicts, as a judge that is asked for structured output), chat_format.py and responses_format.py (the two wire
formats), validation.py (the strict checks), server.py (the ASGI app and its CLI).

The reply is computed from the conversation: it either calls a tool the latest user turn
names (or `get_current_time` when it mentions the time), with arguments that satisfy the tool's
parameters (its required ones, each a value of its type; an enum its first member), or says
"Offline model: I saw {u} user, {a} assistant and {t} tool turns. You said: {latest user text}".

When the latest user turn also says "twice", it calls the tool twice in one answer.

It can also play a model server with a known fault, to show the app copes with it:
OFFLINE_MODEL_CALL_IDS (or `create_offline_app(call_ids=...)`) is `unique` (the default, as
OpenAI does), `reuse` (every tool call is `call_0`, as some OpenAI-compatible servers do) or
`empty` (tool calls have an empty id).

Use it in process with `offline_client()`, an AsyncOpenAI wired to the app, or over HTTP with
`python -m agent_server.offline --port 8123` and OPENAI_BASE_URL=http://127.0.0.1:8123/v1.
"""

from agent_server.offline.replies import CALL_ID_STYLES
from agent_server.offline.server import API_KEY, BASE_URL, create_offline_app, offline_client

__all__ = ["API_KEY", "BASE_URL", "CALL_ID_STYLES", "create_offline_app", "offline_client"]
