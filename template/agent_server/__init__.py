# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The app's package. It runs before any of its modules, so it is where MLflow is configured before MLflow loads."""

import os

# MLflow starts its usage telemetry as it is imported: a request for its settings to a host on the internet,
# then an event about every trace the app exports. An app's traffic is its owner's business, so it is off
# unless the owner turns it on (MLFLOW_DISABLE_TELEMETRY=false; MLflow also honours DO_NOT_TRACK).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
