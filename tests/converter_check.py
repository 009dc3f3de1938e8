"""Render every catalogued history shape and convert it with the installed SDK's chat-completions converter.

Run inside a render, in any environment with openai-agents and openai (the render's own
modules are loaded from their files, so its dependencies need not be installed; the catalogue's shapes are YAML):

    uv run --no-project --with 'openai-agents==0.18.*' --with 'openai<3' --with pyyaml python converter_check.py APP_DIR

Prints one JSON object: for each shape and API mode, the render and the chat messages the
converter made of it. Fails if the converter rejects a render, or if a render or a message
does not validate against the installed `openai` param types.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from importlib.metadata import version
from pathlib import Path
from types import ModuleType


def load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main(app: Path) -> None:
    from agents.models.chatcmpl_converter import Converter
    from openai.types.chat import ChatCompletionMessageParam
    from openai.types.responses import ResponseInputItemParam
    from pydantic import TypeAdapter

    sys.path.insert(0, str(app))
    history = importlib.import_module("agent_server.history")  # stdlib only: it needs none of the app's packages
    catalogue = load("history_catalogue", app / "tests" / "template" / "history_catalogue.py")
    items_type = TypeAdapter(list[ResponseInputItemParam])
    messages_type = TypeAdapter(list[ChatCompletionMessageParam])
    results = {}
    for shape in catalogue.SHAPES:
        for api in history.API_MODES:
            if shape.expected(api) is None:
                continue
            rendered = history.render_history(shape.history, api)
            assert rendered == shape.expected(api), shape.name
            items_type.validate_python(rendered)
            entry = {"render": rendered}
            if api == "chat_completions":
                messages = Converter.items_to_messages(rendered)
                messages_type.validate_python(messages)
                entry["messages"] = messages
            results[f"{shape.name}/{api}"] = entry
    versions = {name: version(name) for name in ("openai-agents", "openai")}
    print(json.dumps({"versions": versions, "results": results}, default=str))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
