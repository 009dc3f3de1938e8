# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""`python -m agent_server.offline --port 8123`: serve the offline model over HTTP."""

from agent_server.offline.server import main

main()
