# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""What the app tells about itself: its traces, its logs, and what users say of its answers.

- tracing.py: MLflow tracing for every request: where traces go, exported off the request path, local traces
  bounded, each trace tagged with its owner and conversation;
- logs.py: the one logging setup (LOG_LEVEL, JSON lines when deployed), and why a tool failed;
- feedback.py: `POST /feedback` and `GET /feedback`, a user's thumbs on an answer, kept on its trace.
"""
