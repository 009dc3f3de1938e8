# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The agent's tools as the app runs them (the owner declares them: agent.py, mcp_servers.py).

- mcp_connections.py: the connections to the declared MCP servers: opened once, left out while they fail;
- mcp_http.py: those connections' HTTP client, with one TLS context for the process;
- approved_calls.py: the calls the user approved, each run at most once, however often its approval comes back;
- approval_answers.py: the first answer to each approval request, kept, and final in every replay;
- progress.py: which calls are announced as they start (tool progress), and as what.
"""
