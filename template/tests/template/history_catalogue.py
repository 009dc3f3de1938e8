# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The history shapes clients really send, and what the render step makes of each.

This is test data (tests/template/test_history_catalogue.py sends every shape through the real
server, both API modes, streaming and not) and the source of docs/history-shapes.md
(tests/template/history_shapes_doc.py writes it). After changing a shape, regenerate the doc:

    uv run python tests/template/history_shapes_doc.py > docs/history-shapes.md
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_server.history import API_MODES
from agent_server.history.tool_pairs import output_bound_call_id

UUID_1 = "0b6c9f3e-5d0a-4a8e-9a63-2f1c7f0d7a11"
UUID_2 = "7f2d4b1a-8c3e-4f5d-b6a7-1e9c0d2f3a44"
UUID_3 = "c4e8a2b6-1d3f-4a5c-8e7b-9f0a1b2c3d55"
TIME = "2026-01-15T09:30:00+00:00"
PNG = "data:image/png;base64,iVBORw0KGgo="
CLIENT_TOOL_ERROR = "Model tried to call unavailable tool 'get_current_time'. No tools are available."
ANSWER = f"The tool returned: {TIME}. Offline model: I saw 1 user, 0 assistant and 1 tool turns."


@dataclass(frozen=True)
class Shape:
    """One history shape: who sends it, what it looks like, and its render.

    `history` is what the client sends before its next user message. `render` is what
    `render_history` returns for it in both API modes, unless `chat_completions` says
    otherwise for that mode. `error` is the HistoryError text instead of a render (in
    the modes `error_modes` lists): the endpoint answers it as a 400 naming the item.
    """

    name: str
    client: str
    note: str
    history: list[dict[str, Any]]
    render: list[dict[str, Any]] | None = None
    chat_completions: list[dict[str, Any]] | None = None
    error: str | None = None
    error_modes: tuple[str, ...] = API_MODES
    group: str = "Clients"

    def expected(self, api: str) -> list[dict[str, Any]] | None:
        """The render in API mode `api`, or None where the shape is an error."""
        if self.error is not None and api in self.error_modes:
            return None
        if api == "chat_completions" and self.chat_completions is not None:
            return self.chat_completions
        return self.render


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str = "call_1", arguments: str = "{}") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "get_current_time", "arguments": arguments}


def output(call_id: str = "call_1", text: str = TIME) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


IMAGINED_TOOL_CALL = [
    {"role": "user", "content": "Use imagined_tool"},
    {"type": "function_call", "call_id": "call_1", "name": "imagined_tool", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "Tool 'imagined_tool' not found."},
    {"role": "assistant", "content": "That tool is not there."},
]
IMAGE_ONLY_TOOL_OUTPUT = [
    {"role": "user", "content": "Show me the logo."},
    {"type": "function_call", "call_id": "call_1", "name": "get_current_time", "arguments": "{}"},
    {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [{"type": "input_image", "image_url": PNG, "detail": "auto"}],
    },
    {"role": "assistant", "content": "Here it is."},
]


def input_text(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


def output_text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text}


SHAPES: list[Shape] = [
    # --- the Databricks chat UI ------------------------------------------------------------
    Shape(
        name="chat-ui-text",
        client="Databricks chat UI (`@databricks/ai-sdk-provider` 0.5.1, Responses endpoint)",
        note=(
            "The UI keeps every turn as Vercel AI SDK messages and the provider converts them: user text "
            "becomes `input_text` parts, and assistant text an `output_text` message with no `type` key. "
            "The UI's reasoning middleware drops the item id; without it the provider sends the id the agent "
            "streamed (`msg_...` from this app, a UUID from others). The render makes plain text of both."
        ),
        history=[
            input_text("Hello"),
            {"role": "assistant", "content": [output_text_part("Hi! How can I help?")]},
            input_text("Tell me a joke."),
            {"role": "assistant", "content": [output_text_part("Why did the chicken cross the road?")], "id": UUID_1},
        ],
        render=[
            input_text("Hello"),
            assistant("Hi! How can I help?"),
            input_text("Tell me a joke."),
            assistant("Why did the chicken cross the road?"),
        ],
    ),
    Shape(
        name="chat-ui-tool-turn",
        client="Databricks chat UI (`@databricks/ai-sdk-provider` 0.5.1, `useRemoteToolCalling: true`)",
        note=(
            "A tool the agent ran comes back as a `function_call` carrying the item id the UI saw "
            "(`fc_...` from this app, a UUID from others) and `arguments` re-serialised by `JSON.stringify` "
            "(no spaces), followed at once by its `function_call_output`. The render drops the ids. "
            "tests/chat_ui_client in the template repository holds this conversation with the real packages."
        ),
        history=[
            input_text("What time is it in Paris?"),
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_current_time",
                "arguments": '{"city":"Paris"}',
                "id": UUID_1,
            },
            {"type": "function_call_output", "call_id": "call_1", "output": TIME},
            {"role": "assistant", "content": [output_text_part(ANSWER)]},
        ],
        render=[
            input_text("What time is it in Paris?"),
            call(arguments='{"city":"Paris"}'),
            output(),
            assistant(ANSWER),
        ],
    ),
    Shape(
        name="chat-ui-reasoning",
        client="Databricks chat UI (`@databricks/ai-sdk-provider` 0.5.1), agent that streams reasoning",
        note=(
            "Reasoning summaries come back as `reasoning` items with the UI's item id. The render drops them: "
            "reasoning belongs to the turn that produced it, and the Responses API rejects ids it did not make."
        ),
        history=[
            input_text("Is 91 prime?"),
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": "91 = 7 x 13."}], "id": UUID_1},
            {"role": "assistant", "content": [output_text_part("No: 91 = 7 x 13.")], "id": UUID_2},
        ],
        render=[input_text("Is 91 prime?"), assistant("No: 91 = 7 x 13.")],
    ),
    Shape(
        name="chat-ui-mcp-approval-answered",
        client="Databricks chat UI (`@databricks/ai-sdk-provider` 0.5.1), after the user approved an MCP tool call",
        note=(
            "The app asked for approval with an `mcp_approval_request` (agent_server/history/approvals.py), the user "
            "approved, and the app ran the tool and answered with its `function_call_output`. On later turns "
            "the UI replays the request, the approval, and the call again with the app's output. The render "
            "keeps the call once, with its output; the request's id is the call id. "
            "tests/test_mcp_in_chat_ui.py in the template repository holds this conversation with the real packages."
        ),
        history=[
            input_text("Delete a.txt"),
            {
                "type": "mcp_approval_request",
                "id": "mcpr_1",
                "name": "delete_file",
                "arguments": '{"name":"a.txt"}',
                "server_label": "tools",
            },
            {"type": "mcp_approval_response", "id": "mcpr_1", "approval_request_id": "mcpr_1", "approve": True},
            {"type": "function_call", "call_id": "mcpr_1", "name": "delete_file", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "mcpr_1", "output": "deleted a.txt"},
            {"role": "assistant", "content": [output_text_part("Done: a.txt is deleted.")]},
        ],
        render=[
            input_text("Delete a.txt"),
            {"type": "function_call", "call_id": "mcpr_1", "name": "delete_file", "arguments": '{"name":"a.txt"}'},
            {"type": "function_call_output", "call_id": "mcpr_1", "output": "deleted a.txt"},
            assistant("Done: a.txt is deleted."),
        ],
    ),
    Shape(
        name="chat-ui-mcp-approval-denied",
        client="Databricks chat UI (`@databricks/ai-sdk-provider` 0.5.1), when the user denies an MCP tool call",
        note=(
            "A denial becomes the call's output, so the model learns the user said no (and why, when the "
            "response has a `reason`). Only an approval runs the tool, and only one whose request this app "
            "signed for this conversation and call; any other approval runs nothing, and the model is told so."
        ),
        history=[
            input_text("Delete a.txt"),
            {
                "type": "mcp_approval_request",
                "id": "mcpr_2",
                "name": "delete_file",
                "arguments": '{"name":"a.txt"}',
                "server_label": "tools",
            },
            {"type": "mcp_approval_response", "id": "mcpr_2", "approval_request_id": "mcpr_2", "approve": False},
        ],
        render=[
            input_text("Delete a.txt"),
            {"type": "function_call", "call_id": "mcpr_2", "name": "delete_file", "arguments": '{"name":"a.txt"}'},
            {"type": "function_call_output", "call_id": "mcpr_2", "output": "The user denied this tool call."},
        ],
    ),
    # --- other clients -----------------------------------------------------------------------
    Shape(
        name="string-content",
        client="MLflow's ConversationSimulator, curl and most scripts",
        note="The simplest shape, and the one the render produces for every assistant message: kept as it is.",
        history=[user("Hello"), assistant("Hi! How can I help?")],
        render=[user("Hello"), assistant("Hi! How can I help?")],
    ),
    Shape(
        name="id-less-output-message",
        client="Chat UIs that replay the last answer as a Responses output message",
        note=(
            "The shape that broke the second prompt: MLflow's request model turns it into "
            '`{"type": "message", "role": "assistant", "content": [...], "status": null}`, which '
            "openai-agents 0.19 and later reject in chat-completions mode. The render makes it plain text."
        ),
        history=[
            user("Hello"),
            {"type": "message", "role": "assistant", "content": [output_text_part("Hi!")], "status": None},
        ],
        render=[user("Hello"), assistant("Hi!")],
    ),
    Shape(
        name="sdk-to-input-list-chat-completions",
        client="openai-agents `result.to_input_list()` after a chat-completions run",
        note=(
            "The SDK's own history carries the placeholder id `__fake_id__`, `provider_data`, `status` and "
            "`logprobs`. The render keeps the call, its output and the text."
        ),
        history=[
            user("What time is it?"),
            {
                **call("call_9ae2777fecd34fe94dfd1424"),
                "id": "__fake_id__",
                "provider_data": {"model": "offline", "response_id": "chatcmpl-9ae2777fecd34fe94dfd1424"},
            },
            output("call_9ae2777fecd34fe94dfd1424"),
            {
                "id": "__fake_id__",
                "content": [{"annotations": [], "text": ANSWER, "type": "output_text", "logprobs": []}],
                "role": "assistant",
                "status": "completed",
                "type": "message",
                "provider_data": {"model": "offline", "response_id": "chatcmpl-33a6984abf206459b0068b66"},
            },
        ],
        render=[
            user("What time is it?"),
            call("call_9ae2777fecd34fe94dfd1424"),
            output("call_9ae2777fecd34fe94dfd1424"),
            assistant(ANSWER),
        ],
    ),
    Shape(
        name="sdk-to-input-list-responses",
        client="openai-agents `result.to_input_list()` after a Responses run",
        note="Real `fc_` and `msg_` ids and `status`: dropped, so the same history also works in the other mode.",
        history=[
            user("What time is it?"),
            {**call("call_bfd42a3d2db868a2f9611edd"), "id": "fc_bfd42a3d2db868a2f9611edd", "status": "completed"},
            output("call_bfd42a3d2db868a2f9611edd"),
            {
                "id": "msg_9fa5b821d2bd427ea9078201",
                "content": [{"annotations": [], "text": ANSWER, "type": "output_text", "logprobs": []}],
                "role": "assistant",
                "status": "completed",
                "type": "message",
            },
        ],
        render=[
            user("What time is it?"),
            call("call_bfd42a3d2db868a2f9611edd"),
            output("call_bfd42a3d2db868a2f9611edd"),
            assistant(ANSWER),
        ],
    ),
    Shape(
        name="app-output-invoke",
        client="This app's own JSON `output`, sent back as it came",
        note="What `/invocations` returns without streaming (`status` on the call in Responses mode only).",
        history=[
            user("What time is it?"),
            {**call("call_1"), "id": "fc_b11bb6d2761641fcb05cf11dfdc4f71e", "status": "completed"},
            output("call_1"),
            {
                "type": "message",
                "id": "msg_9d25ceb722754cb785a798b91999ecfa",
                "content": [{"annotations": [], "text": ANSWER, "type": "output_text", "logprobs": []}],
                "role": "assistant",
                "status": "completed",
            },
        ],
        render=[user("What time is it?"), call("call_1"), output("call_1"), assistant(ANSWER)],
    ),
    Shape(
        name="app-output-stream",
        client="This app's `response.output_item.done` events, sent back as they came",
        note="What a streaming client collects: the same items as without streaming.",
        history=[
            user("What time is it?"),
            {**call("call_1"), "id": "fc_c852f060c154460386e965d1d8bb40a9", "status": "completed"},
            output("call_1"),
            {
                "id": "msg_9e117f40481f43ea93c259aaa441195b",
                "content": [{"annotations": [], "text": ANSWER, "type": "output_text", "logprobs": []}],
                "role": "assistant",
                "status": "completed",
                "type": "message",
            },
        ],
        render=[user("What time is it?"), call("call_1"), output("call_1"), assistant(ANSWER)],
    ),
    Shape(
        name="app-output-responses",
        client="This app's `/responses` output, as the `openai` package gives it back (`model_dump`)",
        note=(
            "`/responses` gives a tool the agent ran as one `mcp_call` with its output, the Responses API's item "
            "for a tool its server ran (its `id` is the call's id): the render makes it the call and output again."
        ),
        history=[
            user("What time is it?"),
            {
                "type": "mcp_call",
                "id": "call_1",
                "name": "get_current_time",
                "arguments": "{}",
                "server_label": "app",
                "output": TIME,
                "status": "completed",
            },
            {
                "type": "message",
                "id": "msg_9d25ceb722754cb785a798b91999ecfa",
                "content": [{"annotations": [], "text": ANSWER, "type": "output_text", "logprobs": []}],
                "role": "assistant",
                "status": "completed",
            },
        ],
        render=[user("What time is it?"), call("call_1"), output("call_1"), assistant(ANSWER)],
    ),
    Shape(
        name="responses-approval-answered",
        client="This app's `/responses` (and the Responses API's hosted MCP tool), after the user approved a call",
        note=(
            "The request, the user's answer, then the call as an `mcp_call` that names the request in "
            "`approval_request_id` and carries what the tool returned: the request is the call, and the "
            "`mcp_call` its output, which the model sees in place of the answer's."
        ),
        history=[
            input_text("Delete a.txt"),
            {
                "type": "mcp_approval_request",
                "id": "mcpr_3",
                "name": "delete_file",
                "arguments": '{"name":"a.txt"}',
                "server_label": "tools",
            },
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_3", "approve": True},
            {
                "type": "mcp_call",
                "id": "mcpr_3",
                "approval_request_id": "mcpr_3",
                "name": "delete_file",
                "arguments": '{"name":"a.txt"}',
                "server_label": "tools",
                "output": "deleted a.txt",
                "status": "completed",
            },
            {"role": "assistant", "content": [output_text_part("Done: a.txt is deleted.")]},
        ],
        render=[
            input_text("Delete a.txt"),
            {"type": "function_call", "call_id": "mcpr_3", "name": "delete_file", "arguments": '{"name":"a.txt"}'},
            {"type": "function_call_output", "call_id": "mcpr_3", "output": "deleted a.txt"},
            assistant("Done: a.txt is deleted."),
        ],
    ),
    # --- chat-completions messages -------------------------------------------------------------
    Shape(
        name="chat-completions-tool-calls",
        client="Chat-completions clients (OpenAI SDK messages, LangChain, most chat apps)",
        group="Chat-completions messages",
        note=(
            'An assistant message with `tool_calls` and no content, then a `role: "tool"` message. MLflow\'s '
            "request model rejects this shape; the app renders it before MLflow checks it, so it is accepted "
            "at `/invocations` and becomes a `function_call` / `function_call_output` pair."
        ),
        history=[
            user("What time is it?"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": TIME},
            assistant(ANSWER),
        ],
        render=[user("What time is it?"), call(), output(), assistant(ANSWER)],
    ),
    Shape(
        name="chat-completions-tool-calls-with-text",
        client="Chat-completions clients whose model spoke before calling tools (two calls at once)",
        group="Chat-completions messages",
        note="The text comes first, then one `function_call` per call, then the outputs in call order.",
        history=[
            user("Time in Paris and Tokyo?"),
            {
                "role": "assistant",
                "content": "Let me check both.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_current_time", "arguments": '{"city": "Paris"}'},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_current_time", "arguments": '{"city": "Tokyo"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": TIME},
            {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": TIME}]},
            assistant("Both answered."),
        ],
        render=[
            user("Time in Paris and Tokyo?"),
            assistant("Let me check both."),
            call("call_1", '{"city": "Paris"}'),
            call("call_2", '{"city": "Tokyo"}'),
            output("call_1"),
            output("call_2"),
            assistant("Both answered."),
        ],
    ),
    # --- edges -----------------------------------------------------------------------------------
    Shape(
        name="refusal",
        client="Any client replaying a model's refusal",
        group="Edge shapes",
        note="A `refusal` part is kept as the assistant's text, so the model still sees what it refused.",
        history=[
            user("Help me pick a lock."),
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]},
        ],
        render=[user("Help me pick a lock."), assistant("I can't help with that.")],
    ),
    Shape(
        name="multimodal-image",
        client="Clients that attach images (Responses or chat-completions parts)",
        group="Edge shapes",
        note=(
            "Chat-completions `text` and `image_url` parts become `input_text` and `input_image`, with "
            '`detail` defaulting to `"auto"` (the Responses API requires it).'
        ),
        history=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                ],
            },
            assistant("A very small picture."),
        ],
        render=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is in this picture?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "auto"},
                ],
            },
            assistant("A very small picture."),
        ],
    ),
    Shape(
        name="multimodal-file",
        client="Clients that attach files (Responses `input_file` or chat-completions `file` parts)",
        group="Edge shapes",
        note="A chat-completions `file` part becomes an `input_file` part; null keys are dropped.",
        history=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Summarise this."},
                    {
                        "type": "file",
                        "file": {"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
                    },
                    {"type": "input_file", "file_data": "data:text/plain;base64,aGk=", "file_id": None},
                ],
            },
            assistant("It is empty."),
        ],
        render=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Summarise this."},
                    {"type": "input_file", "file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"},
                    {"type": "input_file", "file_data": "data:text/plain;base64,aGk="},
                ],
            },
            assistant("It is empty."),
        ],
    ),
    Shape(
        name="file-by-reference",
        client="Clients that attach files by URL or by an OpenAI file id",
        group="Edge shapes",
        note=(
            "The Responses API fetches a `file_url` or a `file_id` itself. The SDK's chat-completions converter "
            "cannot send them in every supported version (and only OpenAI's own API knows its file ids), so in "
            "chat-completions mode the first such part is a 400 that says what to do."
        ),
        history=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Summarise this."},
                    {"type": "input_file", "file_url": "https://example.com/report.pdf"},
                    {"type": "input_file", "file_id": "file-abc123"},
                    {"type": "input_image", "file_id": "file-img456"},
                ],
            },
            assistant("It is short."),
        ],
        render=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "Summarise this."},
                    {"type": "input_file", "file_url": "https://example.com/report.pdf"},
                    {"type": "input_file", "file_id": "file-abc123"},
                    {"type": "input_image", "file_id": "file-img456", "detail": "auto"},
                ],
            },
            assistant("It is short."),
        ],
        error="input[0]: a file without 'file_data' needs LLM_API=responses",
        error_modes=("chat_completions",),
    ),
    Shape(
        name="empty-assistant-content",
        client="Clients whose previous answer was empty (an interrupted stream, a tool-only turn)",
        group="Edge shapes",
        note='`""`, `null`, `[]` and a missing `content` all become `""`.',
        history=[
            user("Hello"),
            {"role": "assistant", "content": None},
            user("Hello?"),
            {"type": "message", "role": "assistant", "content": []},
            user("Anyone?"),
            {"role": "assistant"},
        ],
        render=[user("Hello"), assistant(""), user("Hello?"), assistant(""), user("Anyone?"), assistant("")],
    ),
    Shape(
        name="compaction",
        client="Clients of the Responses API's `/responses/compact`",
        group="Edge shapes",
        note=(
            "A compacted summary is encrypted state only the Responses API can read, and MLflow's request "
            "model rejects the item before any handler runs. The render names it with a 400 in both modes "
            "instead of MLflow's validation dump."
        ),
        history=[{"type": "compaction", "encrypted_content": "gAAAAABo...", "id": "cmp_1"}, user("Go on.")],
        error="input[0]: a 'compaction' item cannot be replayed here: MLflow",
    ),
    Shape(
        name="item-reference",
        client="Clients of the Responses API that refer to stored items by id",
        group="Edge shapes",
        note="The same rule as `compaction`: the referenced item lives in OpenAI's store, not in the request.",
        history=[user("Hello"), {"type": "item_reference", "id": "msg_abc123"}],
        error="input[1]: a 'item_reference' item cannot be replayed here: MLflow",
    ),
    Shape(
        name="hosted-mcp-call",
        client="Clients of the Responses API's hosted MCP tool (OpenAI's `mcp` tool type)",
        group="Edge shapes",
        note=(
            "A tool call OpenAI's servers made: `mcp_call` becomes the tool call and its output (an `error` "
            "becomes the output's text), and `mcp_list_tools` is dropped, as the model does not need it again."
        ),
        history=[
            user("Look it up in the docs."),
            {
                "type": "mcp_list_tools",
                "id": "mcpl_1",
                "server_label": "docs",
                "tools": [{"name": "search", "input_schema": {"type": "object"}}],
            },
            {
                "type": "mcp_call",
                "id": "mcp_1",
                "server_label": "docs",
                "name": "search",
                "arguments": '{"q": "render"}',
                "output": "3 pages found",
                "error": None,
            },
            assistant("Three pages mention it."),
        ],
        render=[
            user("Look it up in the docs."),
            {"type": "function_call", "call_id": "mcp_1", "name": "search", "arguments": '{"q": "render"}'},
            output("mcp_1", "3 pages found"),
            assistant("Three pages mention it."),
        ],
    ),
    Shape(
        name="unknown-item",
        client="Clients replaying hosted-tool items (web search, file search, ...)",
        group="Edge shapes",
        note="Items the render has no rule for are a 400 that names them, never dropped silently.",
        history=[user("Search the web."), {"type": "web_search_call", "id": "ws_1", "status": "completed"}],
        error="input[1]: item type 'web_search_call' is not supported",
    ),
    # --- repairs: histories real conversations produce that both APIs would refuse as they are ----
    Shape(
        name="client-error-beside-server-output",
        client="The AI SDK's `generateText` with `@databricks/ai-sdk-provider` 0.5.1 (the chat UI's fallback)",
        group="Repairs",
        note=(
            "The provider's non-streaming path does not mark the app's tool calls as run by the server, so the "
            "AI SDK tries to run `get_current_time` itself, fails, and records its own error output for the "
            "same call, next to the app's output. Both APIs need exactly one output per call. The app gives "
            "each call it answered the item id `output_bound_call_id(call_id, output)` "
            "(agent_server/history/tool_pairs.py), and the provider replays item ids of calls (never of outputs), so "
            "the render keeps the output that id names, wherever it stands, and drops the client's."
        ),
        history=[
            input_text("What time is it?"),
            {**call(), "id": output_bound_call_id("call_1", TIME)},
            output(text=CLIENT_TOOL_ERROR),
            output(),
            {"role": "assistant", "content": [output_text_part(ANSWER)], "id": "msg_2"},
        ],
        render=[input_text("What time is it?"), call(), output(), assistant(ANSWER)],
    ),
    Shape(
        name="several-outputs-without-a-bound-id",
        client="Clients of other servers, or chat-completions clients (which keep no item ids), that ran a call twice",
        group="Repairs",
        note=(
            "When the call's id names none of its outputs, nothing says which one the server produced: the "
            "newest output is kept, as the latest result of the call, and the others are dropped (and logged)."
        ),
        history=[user("What time is it?"), call(), output(text="first try failed"), output()],
        render=[user("What time is it?"), call(), output()],
    ),
    Shape(
        name="orphan-call",
        client="A chat UI whose user stopped the stream while a tool ran",
        group="Repairs",
        note=(
            "Both APIs need every call answered before the next message, so the render answers a call that "
            "has no output with `INTERRUPTED_CALL_OUTPUT`."
        ),
        history=[user("What time is it?"), {**call(), "id": UUID_3}, assistant("Stopped.")],
        render=[
            user("What time is it?"),
            call(),
            output(text="Error: this tool call was interrupted before it returned a result."),
            assistant("Stopped."),
        ],
    ),
    Shape(
        name="late-output",
        client="Clients that store a tool's output after the text that followed it",
        group="Repairs",
        note="An output that comes after other items is moved up to follow its call.",
        history=[user("What time is it?"), call(), assistant("Checking."), output()],
        render=[user("What time is it?"), call(), output(), assistant("Checking.")],
    ),
    Shape(
        name="orphan-output",
        client="Clients that keep only the last N messages, and so cut between a call and its output",
        group="Repairs",
        note=(
            "Neither API accepts an output whose call is not in the request, and the call cannot be rebuilt "
            "(its name and arguments are gone). What the output said still reaches the model, as a user "
            "message that says what it is: the one role that both APIs accept anywhere and that may carry "
            "images, and one that gives a tool's text no more authority than the user's own."
        ),
        history=[output(), {"role": "assistant", "content": [output_text_part("It is morning.")]}],
        render=[
            user(f"[Output of tool call 'call_1', whose call is no longer in this conversation]\n{TIME}"),
            assistant("It is morning."),
        ],
    ),
    Shape(
        name="reused-call-ids",
        client="Apps on model servers that number every tool call `call_0`",
        group="Repairs",
        note=(
            "Both APIs need unique call ids, and openai-agents would skip a call whose id and arguments "
            "match an earlier one. Each output goes to the earliest call with its id that has no output yet, "
            "and each later call with a used id gets a new one, `<id>_<n>`, that no item in the history has. "
            "(This app's own answers never reuse ids: see agent_server/output_items.py.)"
        ),
        history=[
            user("What time is it?"),
            call("call_0"),
            output("call_0"),
            user("And now?"),
            call("call_0"),
            call("call_0"),
            output("call_0", "09:31"),
            output("call_0", "09:32"),
        ],
        render=[
            user("What time is it?"),
            call("call_0"),
            output("call_0"),
            user("And now?"),
            call("call_0_2"),
            call("call_0_3"),
            output("call_0_2", "09:31"),
            output("call_0_3", "09:32"),
        ],
    ),
    Shape(
        name="empty-call-ids",
        client="Apps on model servers that send tool calls with an empty id",
        group="Repairs",
        note="The same rule as `reused-call-ids`: every call with an empty id gets `call_<n>`.",
        history=[user("What time is it?"), call(""), output(""), assistant("It is 09:30.")],
        render=[user("What time is it?"), call("call_1"), output("call_1"), assistant("It is 09:30.")],
    ),
    Shape(
        name="image-with-caption",
        client="Chat clients that put a caption (`text`) on an image or file part",
        group="Repairs",
        note=(
            "No API defines `text` on an image or file part, and MLflow's request model would read such a "
            "part as text and lose the image. The caption becomes a text part right after it."
        ),
        history=[
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": PNG, "detail": "auto", "text": "our logo"},
                    {"type": "input_text", "text": "What colour is it?"},
                ],
            },
            assistant("Blue."),
        ],
        render=[
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": PNG, "detail": "auto"},
                    {"type": "input_text", "text": "our logo"},
                    {"type": "input_text", "text": "What colour is it?"},
                ],
            },
            assistant("Blue."),
        ],
    ),
    Shape(
        name="malformed-call-arguments",
        client="Models cut off in the middle of a tool call (a length limit, a dropped stream), replayed as they were",
        group="Repairs",
        note=(
            "Arguments that are not a JSON object pass through to the model server as they are, and strict servers "
            "(vLLM, several hosted OpenAI-compatible providers, and the offline model) refuse such a history on "
            "every later turn. The render wraps the text in an object, under `arguments_as_sent`, so the model "
            "still sees what it sent."
        ),
        history=[user("What time is it in Paris?"), call(arguments='{"tz": "Europe/Par'), output(), assistant("Done.")],
        render=[
            user("What time is it in Paris?"),
            call(arguments='{"arguments_as_sent": "{\\"tz\\": \\"Europe/Par"}'),
            output(),
            assistant("Done."),
        ],
    ),
    Shape(
        name="call-to-a-tool-that-does-not-exist",
        client="Apps whose model called a tool it made up, or one the agent no longer has",
        group="Edge shapes",
        note=(
            "The app answers such a call to the model with an error output (openai-agents' "
            "`tool_not_found_behavior`, `Tool '...' not found.`), and the turn goes on; it used to fail. "
            "Replayed, the call and its error output are a history like any other."
        ),
        history=IMAGINED_TOOL_CALL,
        render=IMAGINED_TOOL_CALL,  # a history like any other
    ),
    Shape(
        name="image-only-tool-output",
        client="Tools (MCP servers, the owner's own) that return an image, in `chat_completions` mode",
        group="Repairs",
        note=(
            "A chat-completions tool message holds only text, and openai-agents would put "
            '`"[tool output omitted]"` in place of the image, without a word. In that mode the tool message names '
            "the image, and the image follows in a user message, after the call's outputs. The Responses API "
            "takes the image in the output as it is."
        ),
        history=IMAGE_ONLY_TOOL_OUTPUT,
        render=IMAGE_ONLY_TOOL_OUTPUT,  # the Responses API takes it as it is
        chat_completions=[
            user("Show me the logo."),
            call(),
            output(text="[The tool's output holds 1 image or file part(s), in the user message that follows]"),
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "[The image or file part(s) of the output of tool call 'call_1']"},
                    {"type": "input_image", "image_url": PNG, "detail": "auto"},
                ],
            },
            assistant("Here it is."),
        ],
    ),
    Shape(
        name="output-without-a-call-id",
        client="Clients that lost a tool output's `call_id` (a hand-written history, a converter that drops it)",
        group="Repairs",
        note=(
            "An output that names no call cannot answer one. Like an output whose call is gone "
            "(`orphan-output`), what it said reaches the model as a user message that says what it is."
        ),
        history=[user("What time is it?"), {"type": "function_call_output", "output": TIME}, assistant("It is 09:30.")],
        render=[
            user("What time is it?"),
            user(f"[Output of a tool call, which the output does not name]\n{TIME}"),
            assistant("It is 09:30."),
        ],
    ),
]

SHAPES_BY_NAME = {shape.name: shape for shape in SHAPES}
assert len(SHAPES_BY_NAME) == len(SHAPES), "shape names must be unique"


# --- Conversation memory: what a client sends, merged with what is stored (agent_server/memory/merge.py) ---


@dataclass(frozen=True)
class MergeCase:
    name: str
    client: str  # who sends it
    note: str
    stored: list[dict[str, Any]]  # the conversation's stored items (as the render stores them)
    sent: list[dict[str, Any]]  # the request's `input`, with the conversation's id in `context.conversation_id`
    kind: str  # memory_merge.merge's answer: new conversation, extends, new turn or diverged


APPROVAL_ID = "mcpr_" + "5" * 48
MERGES: list[MergeCase] = [
    MergeCase(
        "first-turn", "any client", "Nothing is stored yet: the conversation starts with what was sent.",
        [], [user("Hello")], "new conversation",
    ),
    MergeCase(
        "new-turn-alone", "a client that relies on memory (the app's chat page, upstream agent clients)",
        "Only the new message: it follows the stored conversation.",
        [user("Hello"), assistant("Hi!")], [user("And now?")], "new turn",
    ),
    MergeCase(
        "whole-history-again", "the Databricks chat UI, which keeps its own history and names its chat",
        "The stored conversation, replayed in the client's own shapes, then the new message: only that is added.",
        [user("Hello"), assistant("Hi!")],
        [user("Hello"), {"type": "message", "role": "assistant", "content": [output_text_part("Hi!")]},
         user("And now?")],
        "extends",
    ),
    MergeCase(
        "whole-history-chat-completions", "a client that keeps chat-completions messages",
        "Tool calls on an assistant message and `role: tool` outputs render as the stored items did.",
        [user("What time is it?"), call(), output(), assistant("It is noon.")],
        [
            user("What time is it?"),
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_current_time", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": TIME},
            assistant("It is noon."),
            user("And now?"),
        ],
        "extends",
    ),
    MergeCase(
        "edited-last-turn", "a chat UI whose user edited their last message",
        "The client's version of the conversation wins: it replaces the stored one.",
        [user("Hello"), assistant("Hi!"), user("Waht time is it?"), assistant("Pardon?")],
        [user("Hello"), assistant("Hi!"), user("What time is it?")],
        "diverged",
    ),
    MergeCase(
        "regenerated-answer", "a chat UI asked to answer the last message again",
        "The conversation without its last answer: replaced, and the model answers the last message again.",
        [user("Hello"), assistant("Hi!"), user("What time is it?"), assistant("Noon.")],
        [user("Hello"), assistant("Hi!"), user("What time is it?")],
        "diverged",
    ),
    MergeCase(
        "approval-answer-alone", "the app's chat page, answering an MCP approval request",
        "The stored request, then the user's answer to it (agent_server/history/approvals.py checks it was the app's).",
        [user("Delete a.txt"),
         {"type": "function_call", "call_id": APPROVAL_ID, "name": "delete_file", "arguments": '{"name":"a.txt"}'}],
        [{"type": "mcp_approval_response", "approval_request_id": APPROVAL_ID, "approve": False}],
        "new turn",
    ),
    MergeCase(
        "same-message-again", "a user who sends the first message again",
        "A message alone is a new turn, even one the conversation holds already: the model sees it twice, "
        "as the user sent it twice.",
        [user("Hello"), assistant("Hi!")], [user("Hello")], "new turn",
    ),
]  # fmt: skip
