# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""Which of the owner's models (LLM_MODELS, config/models.py) a turn runs on, and GET /models, which lists them.

A request chooses: /responses by its `model`, /invocations by `custom_inputs.model` (MLflow's ResponsesAgentRequest
carries a client's own inputs there; its `context` holds only conversation_id and user_id). A listed name is the
turn's model, and becomes its conversation's from then on. Any other name (a placeholder such as "gpt-4o", or the app's
own name, which clients of a custom agent send) or none: the conversation's model, else the default. Never a 400:
today's clients keep working. Every answer names the model that answered (/responses' `model`, `custom_outputs.model`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter

from agent_server import config
from agent_server.config.models import ModelChoices
from agent_server.errors import BadRequest
from agent_server.turn_context import RESPONSES

if TYPE_CHECKING:
    from agents import RunConfig

logger = logging.getLogger("agent_server.turn")
MODEL_KEY = "model"  # in /invocations' custom_inputs, and /responses' body
STARTED = int(time.time())  # GET /models' `created`: when this app started (the OpenAI API's is the model's own)

router = APIRouter()


def choices() -> ModelChoices:
    return config.settings().models


def requested(path: str, body: Mapping[str, Any]) -> str | None:
    """The name the request asks for, listed or not; BadRequest if it is not a string."""
    custom = body.get("custom_inputs")
    where, name = ("model", body.get(MODEL_KEY)) if path == RESPONSES else ("custom_inputs.model", None)
    if path != RESPONSES and isinstance(custom, dict):
        name = custom.get(MODEL_KEY)
    if name is not None and not isinstance(name, str):
        raise BadRequest(f"'{where}' must be a string: one of GET /models' ids.", param=where)
    return name


def listed(name: str | None) -> str | None:
    """`name` if the owner lists it, else None."""
    return name if name is not None and name in choices().names else None


def chosen(asked: str | None, stored: str | None) -> str:
    """The turn's model: the request's listed choice, else the conversation's (if still listed), else the default."""
    if (picked := listed(asked)) is not None:
        return picked
    if asked is not None and choices().several:
        logger.info("model %r is not listed (LLM_MODELS): the conversation's, or the default, answers", asked[:200])
    return listed(stored) or choices().default


async def pinned(path: str, body: dict[str, Any], owner: str, conversation_id: str | None) -> None:
    """A background run's request, its model named in it as its client would (runs/requests.py): each attempt of the
    run, resumed or recovered, runs on the model its turn started with, and its response says which."""
    asked = requested(path, body)
    if not choices().several:
        return
    if not isinstance(body.get("custom_inputs") or {}, dict):
        raise BadRequest("'custom_inputs' must be an object.", param="custom_inputs")
    from agent_server import memory  # the conversation's model, when the run continues one

    stored = await memory.stored_model(owner, conversation_id) if conversation_id else None
    name = chosen(asked, stored)
    if path == RESPONSES:
        body[MODEL_KEY] = name
    else:
        body["custom_inputs"] = {**(body.get("custom_inputs") or {}), MODEL_KEY: name}


def answered_by(path: str, body: Mapping[str, Any]) -> str:
    """The model a run's request (pinned) names: what its response says answered."""
    try:
        return listed(requested(path, body)) or choices().default
    except BadRequest:
        return choices().default


def run_config(base: RunConfig, name: str) -> RunConfig:
    """`base` for a turn on model `name`: as it is for the default (the owner's agent's model answers, as without
    LLM_MODELS); else with the model `name` (llm.model_named), which the SDK runs every agent of the turn on."""
    if not name or name == choices().default:
        return base
    from agent_server import llm

    key = (id(base), dataclasses.replace(llm.llm_settings(), model=name))
    if key not in _RUN_CONFIGS:
        _RUN_CONFIGS[key] = dataclasses.replace(base, model=llm.model_named(name))
    return _RUN_CONFIGS[key]


_RUN_CONFIGS: dict[tuple[int, Any], RunConfig] = {}  # made once per model: RunConfig() inspects its own type hints


def custom_outputs(name: str) -> dict[str, str]:
    """What an answer says of its model beside its items: with several listed, the one that answered."""
    return {MODEL_KEY: name} if choices().several and name else {}


@router.get("/models")
async def list_models() -> dict[str, Any]:
    """The models a client may pick, in the OpenAI API's shape (openai.types.Model), in the owner's order; beside
    its fields, what the page's picker shows (`label`) and which one a conversation gets unless it picks (`default`)."""
    current, owner = choices(), config.settings().llm.provider
    return {
        "object": "list",
        "data": [
            {"id": m.name, "object": "model", "created": STARTED, "owned_by": owner, "label": m.label,
             "default": m.name == current.default}
            for m in current.listed
        ],
    }  # fmt: skip
