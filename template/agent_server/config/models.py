# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The models users may pick (LLM_MODELS), declared beside the rest (config/__init__.py); stdlib only.

`LLM_MODELS=name=Label,name2` lists them, each with an optional label the page shows; every one is served by
LLM_PROVIDER through LLM_API, as LLM_MODEL is: one app does not mix providers (an entry that names another provider,
`openai:gpt-4.1`, is refused at start-up). The default is LLM_MODEL when it is set (listed first if the list does not
name it), else the list's first. Unset, the app offers LLM_MODEL alone, as before the list existed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from agent_server.config import defaults
from agent_server.config.setting_types import ConfigurationError, read_group, setting, shown_text

MODEL_NAME = re.compile(r"[A-Za-z0-9\-_.:/@]{1,200}")  # as copier's llm_model answer: it lands in YAML and .env
MAX_MODELS = 20
PROVIDER_NAMES = ("openai", "databricks", "offline")


@dataclass(frozen=True)
class OfferedModel:
    name: str  # the model or serving-endpoint name, as the provider knows it
    label: str  # what the page's picker shows; the name when the list gives none


def offered(name: str, raw: str) -> tuple[OfferedModel, ...]:
    """`name=Label,name2,...`: the names as LLM_MODEL takes one, each label shown text of up to 60 characters."""
    found: list[OfferedModel] = []
    for entry in (part.strip() for part in raw.split(",")):
        if not entry:
            continue
        model, _, label = (piece.strip() for piece in entry.partition("="))
        if not MODEL_NAME.fullmatch(model):
            raise ConfigurationError(f"{name}: {model!r} is not a model name (letters, digits and - _ . : / @)")
        prefix = model.split(":", 1)[0].lower()
        if ":" in model and prefix in PROVIDER_NAMES:
            raise ConfigurationError(
                f"{name}: {model!r} names a provider; every listed model is served by LLM_PROVIDER (mixing providers"
                " is not supported): list the name alone"
            )
        if any(model == other.name for other in found):
            raise ConfigurationError(f"{name} lists {model!r} twice")
        found.append(OfferedModel(model, shown_text(60)(name, label) if label else model))
    if len(found) > MAX_MODELS:
        raise ConfigurationError(f"{name} lists {len(found)} models; at most {MAX_MODELS}")
    return tuple(found)


@dataclass(frozen=True)
class ModelChoices:
    """The models a conversation may use; `default` answers a conversation that picked none."""

    listed: tuple[OfferedModel, ...] = setting("LLM_MODELS", offered, (), "models users may pick: name=Label, ...")
    default: str = ""  # no variable of its own: LLM_MODEL, or the list's first

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(model.name for model in self.listed)

    @property
    def several(self) -> bool:
        """More than one model to pick from: the page shows its picker, and the offline model says which it is."""
        return len(self.listed) > 1

    @classmethod
    def read(cls, env: Mapping[str, str]) -> ModelChoices:
        """LLM_MODELS (unset: the copier answer llm_models), with LLM_MODEL the default: at the list's head if it
        does not name it, so a deploy that gives LLM_MODEL from a resource (databricks.yml) lists the others alone."""
        raw = (env.get("LLM_MODELS") or "").strip() or getattr(defaults, "LLM_MODELS", "")
        listed = read_group(cls, {"LLM_MODELS": raw})["listed"]
        model = (env.get("LLM_MODEL") or "").strip()
        if not model and listed:
            return cls(listed, listed[0].name)
        model = model or defaults.LLM_MODEL
        if model not in (each.name for each in listed):
            listed = (OfferedModel(model, model), *listed)
        if len(listed) > MAX_MODELS:
            raise ConfigurationError(f"LLM_MODEL and LLM_MODELS name {len(listed)} models; at most {MAX_MODELS}")
        return cls(listed, model)
