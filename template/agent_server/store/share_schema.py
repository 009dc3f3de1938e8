# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The share links' table (shares.py), and the migration that adds it (schema 11).

`agent_shares` holds each link: a public id (its owner lists and revokes it by it), the SHA-256 of its token (the
token itself is never kept), its owner and conversation, the name the owner chose to be shown as, and the snapshot.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()
shares = sa.Table(
    "agent_shares",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),  # public: the owner lists and revokes the link by it
    sa.Column("token_hash", sa.String(64), nullable=False, unique=True),  # SHA-256 of the link's token, in hex
    sa.Column("owner", sa.String(320), nullable=False),
    sa.Column("conversation_id", sa.String(200), nullable=False),
    sa.Column("shown_name", sa.String(80), nullable=False),  # the only identity a viewer sees: the owner's choice
    sa.Column("title", sa.String(200), nullable=False),
    sa.Column("items", sa.Text, nullable=False),  # the snapshot: [{"item", "item_id"}], in JSON
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Index("agent_shares_conversation", "owner", "conversation_id"),
)


def add_shares(connection: sa.Connection) -> None:
    """Schema 10: the share links."""
    metadata.create_all(connection, tables=[shares])
