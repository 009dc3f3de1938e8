# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""`GET /responses/{id}/input_items` (agent_server/runs/input_items.py) pages as the OpenAI API does: `limit`,
`after`, `order`, `has_more`, `first_id`, `last_id`, an id on every item; read with the API's own type and with
OpenAI's own client."""

# ruff: noqa: F811  (the fixtures of test_memory.py and test_runs.py, imported below, are the tests' arguments)
from __future__ import annotations

from typing import Any

from openai import OpenAI
from openai.types.responses.response_item_list import ResponseItemList

from .test_memory import BOB, backend  # noqa: F401  (the same SQLite and PostgreSQL as memory's tests)
from .test_runs import client, ended  # noqa: F401

SAID = [f"line {n}" for n in range(25)]


def started(client: Any) -> str:
    """A background run of 25 input items: user and assistant messages, in turn, the last the user's."""
    sent = [{"role": "user" if n % 2 == 0 else "assistant", "content": said} for n, said in enumerate(SAID)]
    run_id = client.post("/responses", json={"input": sent, "background": True}).json()["id"]
    ended(client, run_id)
    return run_id


def listed(client: Any, run_id: str, **params: Any) -> dict[str, Any]:
    answer = client.get(f"/responses/{run_id}/input_items", params=params)
    assert answer.status_code == 200, answer.text
    if answer.json()["data"]:  # the API's own type (an empty page's ids are null, there being no item to name)
        ResponseItemList.model_validate(answer.json())  # every item with its id, in the API's shape
    return answer.json()


def texts(page: dict[str, Any]) -> list[str]:
    return [item["content"][0]["text"] for item in page["data"]]


def test_input_items_come_a_page_at_a_time_newest_first_each_with_an_id(client):
    run_id = started(client)
    first = listed(client, run_id)
    assert texts(first) == SAID[::-1][:20] and first["has_more"] is True, "20 a page by default, newest first"
    assert (first["first_id"], first["last_id"]) == (first["data"][0]["id"], first["data"][-1]["id"])
    rest = listed(client, run_id, after=first["last_id"])
    assert texts(rest) == SAID[::-1][20:] and rest["has_more"] is False
    ids = [item["id"] for item in first["data"] + rest["data"]]
    assert len(set(ids)) == 25 and all(ids), "an id on every item, each its own"
    assert [item["id"] for item in listed(client, run_id)["data"]] == ids[:20], "the same ids on every call"

    oldest = listed(client, run_id, order="asc", limit=2)
    assert texts(oldest) == SAID[:2] and oldest["has_more"] is True
    assert texts(listed(client, run_id, order="asc", limit=100, after=oldest["last_id"])) == SAID[2:]
    last = listed(client, run_id, after=ids[-1])
    assert last == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}


def test_openais_own_client_pages_through_every_input_item(client):
    run_id = started(client)
    openai = OpenAI(base_url=str(client.base_url), api_key="unused", http_client=client, max_retries=0)
    items = list(openai.responses.input_items.list(run_id, limit=7, order="asc"))  # its pager follows `after`
    assert [item.content[0].text for item in items] == SAID  # type: ignore[union-attr]


def test_a_bad_page_query_is_a_400_that_names_its_parameter(client):
    run_id = started(client)
    for params, param in [
        ({"limit": "0"}, "limit"),
        ({"limit": "101"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"limit": "9" * 5000}, "limit"),
        ({"order": "newest"}, "order"),
        ({"after": "msg_not_an_item_of_this_response"}, "after"),
    ]:
        answer = client.get(f"/responses/{run_id}/input_items", params=params)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == param, (params, answer.text)
    assert client.get(f"/responses/{run_id}/input_items", headers={"x-test-user": BOB}).status_code == 404
