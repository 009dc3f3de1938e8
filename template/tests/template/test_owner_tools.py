# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The owner's own function tools, added to agent.py as AGENTS.md says: the offline model calls them with arguments
their parameters accept (offline/arguments.py), and a tool that fails is logged with why (logs.tool_failure: with
openai-agents 0.24, the locked version; 0.21 to 0.23 do not hand the app a tool's exception)."""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import logging
import uuid
from typing import Annotated, Any, Literal

import pytest
from agents import Agent, function_tool
from agents.tool_context import ToolContext
from pydantic import BaseModel, Field
from support import Chat, post, reply_text

from agent_server import llm
from agent_server.offline.arguments import tool_arguments
from agent_server.tools import approved_calls

SDK_FALLBACK = "An error occurred while running the tool"


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


class Address(BaseModel):
    street: str
    number: int
    note: str | None = None


class Parcel(BaseModel):
    to: Address
    sizes: list[Size]
    weight: float


@pytest.fixture
def shipped(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The agent has one tool of the owner's, `ship`, with required int, str, Literal, Enum and nested-model
    parameters and an optional one; each call records what it received."""
    received: list[dict[str, Any]] = []

    @function_tool
    def ship(
        count: int, label: str, speed: Literal["slow", "fast"], size: Size, parcel: Parcel, gift: bool = False
    ) -> str:
        """Ship a parcel."""
        received.append({"count": count, "label": label, "speed": speed, "size": size, "parcel": parcel, "gift": gift})
        return f"shipped {count} {label} ({speed}, {size.value}) to {parcel.to.street} {parcel.to.number}"

    owners = Agent(name="shop", instructions="x", model=llm.model(), tools=[ship])
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: owners)
    return received


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream"])
def test_the_offline_model_calls_an_owners_tool_with_arguments_it_accepts(app_client, shipped, stream):
    items = Chat(app_client, stream).send("Please ship a parcel")
    call = next(item for item in items if item["type"] == "function_call")
    sent = json.loads(call["arguments"])
    # Each required parameter a value of its type, each enum its first member; the optional `gift` left out.
    assert type(sent["count"]) is int and type(sent["label"]) is str and "gift" not in sent
    assert (sent["speed"], sent["size"]) == ("slow", "small")
    assert type(sent["parcel"]["to"]["street"]) is str and type(sent["parcel"]["to"]["number"]) is int
    assert [type(got) for got in shipped[0].values()] == [int, str, str, Size, Parcel, bool]
    assert reply_text(items).startswith(f"The tool returned: shipped {sent['count']} {sent['label']} (slow, small)")


def bounded(
    sides: Annotated[int, Field(ge=4, le=20)],
    ratio: Annotated[float, Field(gt=2.5)],
    code: Annotated[str, Field(min_length=12, max_length=12)],
    pair: tuple[int, str],
    at_least_two: Annotated[list[Address], Field(min_length=2)],
    maybe: int | None,
    when: datetime.date,
    ticket: uuid.UUID,
    point: Annotated[Size, Field(description="a $ref with a sibling")] = Size.LARGE,
) -> str:
    """Every kind of constraint pydantic writes into a schema."""
    return f"{sides} {ratio} {code} {pair} {len(at_least_two)} {maybe} {when} {ticket} {point.value}"


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "loose"])
def test_the_arguments_satisfy_bounds_lengths_tuples_and_nullables_as_the_sdk_checks_them(strict):
    tool = function_tool(bounded, strict_mode=strict)
    arguments = tool_arguments(tool.params_json_schema)
    context = ToolContext(context=None, tool_name=tool.name, tool_call_id="call_1", tool_arguments=arguments)
    output = asyncio.run(tool.on_invoke_tool(context, arguments))  # the SDK's own parse of the arguments
    assert not output.startswith(SDK_FALLBACK), arguments
    sides, ratio, code, *_ = output.split()
    assert 4 <= int(sides) <= 20 and float(ratio) > 2.5 and len(code) == 12
    assert tool_arguments(tool.params_json_schema) == arguments, "the same schema gets the same arguments"


def test_a_tool_that_raises_is_logged_with_why_and_the_model_reads_the_sdks_message(app_client, monkeypatch, caplog):
    @function_tool
    def roll_dice(sides: int) -> str:
        """Roll a die."""
        raise ValueError(f"a die with {sides} side cannot roll")

    owners = Agent(name="dice", instructions="x", model=llm.model(), tools=[roll_dice])
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: owners)
    with caplog.at_level(logging.WARNING, logger="agent_server"):
        reply = reply_text(Chat(app_client, stream=False).send("roll_dice please"))
    assert reply.startswith(f"The tool returned: {SDK_FALLBACK}")
    [record] = [record for record in caplog.records if record.name == "agent_server.observability.logs"]
    assert record.levelno == logging.WARNING
    assert "Tool roll_dice failed" in record.getMessage()
    assert "ValueError: a die with 1 side cannot roll (raised at " in record.getMessage()
    assert "in roll_dice)" in record.getMessage()
    assert record.exc_info and record.exc_info[1].args == ("a die with 1 side cannot roll",)


def test_an_approved_tool_that_raises_is_logged_too(app_client, monkeypatch, caplog):
    @function_tool(needs_approval=True)
    def cancel_order(order: int) -> str:
        """Cancel an order (it asks first)."""
        raise RuntimeError(f"order {order} is already shipped")

    owners = Agent(name="shop", instructions="x", model=llm.model(), tools=[cancel_order])
    monkeypatch.setattr("agent_server.agent.create_agent", lambda: owners)
    approved_calls.forget_all()
    chat = Chat(app_client, stream=False)
    [approval] = chat.send("cancel_order please")
    chat.history.append({"type": "mcp_approval_response", "approval_request_id": approval["id"], "approve": True})
    with caplog.at_level(logging.WARNING, logger="agent_server"):
        items = post(chat.client, chat.history, stream=False)
    assert items[0]["output"].startswith(SDK_FALLBACK)  # the approved call ran, in the app, and failed
    [record] = [record for record in caplog.records if record.name == "agent_server.observability.logs"]
    assert "Tool cancel_order failed" in record.getMessage() and "RuntimeError: order 1 is already shipped" in (
        record.getMessage()
    )
