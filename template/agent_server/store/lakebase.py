# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The password of a Lakebase database: a short-lived OAuth token from the workspace, never a stored secret.

databricks-sdk asks the workspace for a database credential for the instance (MEMORY_LAKEBASE_INSTANCE,
which databricks.yml fills from the app's `database` resource), as the app's own identity. The
token is kept until REFRESH_BEFORE_SECONDS before it expires, and then replaced before the next
connection is made: a connection already open stays open, as PostgreSQL checks a password only
when connecting.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime

REFRESH_BEFORE_SECONDS = 300
ASSUMED_LIFETIME_SECONDS = 3600  # when the workspace does not say when a token expires


class LakebaseToken:
    def __init__(self, instance: str) -> None:
        self.instance = instance
        self._token = ""
        self._expires = 0.0
        self._refreshing = asyncio.Lock()

    def current(self) -> str:
        """The token to connect with (called by SQLAlchemy for each new connection)."""
        return self._token

    async def fresh(self) -> None:
        """Replace the token if it expires within REFRESH_BEFORE_SECONDS (in a worker thread: it is an HTTP call)."""
        if self._expires - time.time() > REFRESH_BEFORE_SECONDS:
            return
        async with self._refreshing:
            if self._expires - time.time() > REFRESH_BEFORE_SECONDS:
                return  # another request refreshed it while this one waited
            self._token, self._expires = await asyncio.to_thread(self._generate)

    def _generate(self) -> tuple[str, float]:
        from databricks.sdk import WorkspaceClient  # a large import, which only a Lakebase login needs

        credential = WorkspaceClient().database.generate_database_credential(
            request_id=str(uuid.uuid4()), instance_names=[self.instance]
        )
        if not credential.token:
            raise RuntimeError(f"the workspace gave no database token for Lakebase instance {self.instance!r}")
        return credential.token, _expiry(credential.expiration_time)


def _expiry(expiration_time: str | None) -> float:
    if not expiration_time:
        return time.time() + ASSUMED_LIFETIME_SECONDS
    return datetime.fromisoformat(expiration_time.replace("Z", "+00:00")).timestamp()
