# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The event loop, shared fairly between requests: one module a concern, each imported by what it serves.

- offload.py: a request's CPU work in a worker thread, unless it is smaller than the hop to one;
- turn_starts.py: new turns start a few at a time, so that the streams already running go first;
- fair_steps.py: with fair shares on (RATE_LIMIT_*), a lighter identity's turn goes first, step by step;
- garbage_collection.py: start-up's objects frozen, and a long full collection put off to a clock.
"""
