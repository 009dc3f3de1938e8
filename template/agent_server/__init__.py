# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
