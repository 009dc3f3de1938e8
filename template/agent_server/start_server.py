# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The `start-app` command: check the configuration, then serve agent_server.app on a port.

The configuration is checked before the app is imported, so a missing credential
fails in a moment with a message that names what to set.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from agent_server import llm


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="start-app", description="Serve the agent on /invocations.")
    default_port = int(os.environ.get("DATABRICKS_APP_PORT") or os.environ.get("PORT") or 8000)
    parser.add_argument("--host", default=os.environ.get("HOST", "0.0.0.0"))
    parser.add_argument("--port", type=int, default=default_port, help="default: $DATABRICKS_APP_PORT, $PORT or 8000")
    parser.add_argument("--workers", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        current = llm.check_configuration()
    except llm.ConfigurationError as error:
        sys.exit(f"start-app: {error}")
    print(f"start-app: {current.provider} model {current.model!r} over {current.api} on port {args.port}", flush=True)

    import uvicorn

    _flush_traces_on_stop()
    uvicorn.run("agent_server.app:app", host=args.host, port=args.port, workers=args.workers)


def _flush_traces_on_stop() -> None:
    """Send the traces still queued before the process stops.

    uvicorn shuts down on SIGINT or SIGTERM, then re-raises the signal to the handler that was there before
    it, which skips atexit (and so MLflow's own flush). This handler flushes, then stops as the signal would.
    """
    from agent_server import tracing

    def stop(signum: int, frame: object) -> None:
        tracing.flush()
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)


if __name__ == "__main__":
    main()
