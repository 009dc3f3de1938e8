# Owned by the template: changes here are overwritten by `copier update`. Put your own code in agent_server/agent.py.
"""The app's one logging setup, which start-app hands to uvicorn for the app's loggers and its own.

- LOG_LEVEL: DEBUG, INFO (the default), WARNING or ERROR.
- LOG_FORMAT: text, or json (one JSON object per line, which log search tools read field by field).
  The default is json when deployed (Databricks Apps, or APP_ENV=production), text otherwise.

A tool that fails is logged here too (`tool_failure`), with its exception and traceback. Sign-in's codes never are
(NoSignInCodes).
"""

from __future__ import annotations

import json
import logging
import traceback
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agent_server import config
from agent_server.errors import HttpError

if TYPE_CHECKING:  # start-app reads this module before the SDK is imported
    from agents import ToolErrorFormatterArgs

logger = logging.getLogger(__name__)

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonLines(logging.Formatter):
    """A record as one line of JSON: time, level, logger, message (and the exception, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class ExpectedFailures(logging.Filter):
    """A record of an exception the app answers on purpose (an HttpError, such as a turn that could not be stored:
    503) keeps its message and reason, and loses its traceback: one line, not thirty."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpError):
            record.msg, record.args = f"{record.getMessage()}: {error} ({error.status})", None
            record.exc_info, record.exc_text = None, None
        return True


class NoSignInCodes(logging.Filter):
    """The access log's line for sign-in's callback (sign_in/flow.py) without its query, which holds the provider's
    one-time code, and a share link's without its token (memory/shares_api.py): codes and tokens never reach a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) > 2 and str(args[2]).startswith("/sign-in/callback?"):
            record.args = (*args[:2], "/sign-in/callback?(not logged)", *args[3:])
        elif isinstance(args, tuple) and len(args) > 2 and str(args[2]).startswith(SHARE_PATHS):
            record.args = (*args[:2], logged_path(str(args[2])), *args[3:])
        return True


SHARE_PATHS = ("/s/", "/shared/")  # the share link's page, and its routes: the token follows


def logged_path(path: str) -> str:
    """A request's path as a log may show it: a share link's token (and any query) left out."""
    if not path.startswith(SHARE_PATHS):
        return path
    prefix, _token, *rest = path.split("?", 1)[0].split("/", 3)[1:] + [""]
    return f"/{prefix}/(not logged)" + ("/" + rest[0] if rest and rest[0] else "")


def log_config(current: config.Settings | None = None) -> dict[str, Any]:
    """A logging.config dictionary for LOG_LEVEL and LOG_FORMAT; ConfigurationError for a bad value."""
    current = current or config.settings()
    level = current.logs.level
    kind = current.logs.format or ("json" if current.deployment.deployed else "text")
    formatter = {"()": f"{__name__}.JsonLines"} if kind == "json" else {"format": TEXT}
    handler = {"class": "logging.StreamHandler", "formatter": "app", "stream": "ext://sys.stderr"}
    # uvicorn's loggers go through the root handler, so every line has one format.
    quiet = {"level": level, "handlers": [], "propagate": True}
    # The HTTP clients (httpx, and httpx2 under openai 3) say "HTTP Request: POST ..." for every model call at
    # INFO: a line per call that the access log and the trace already tell, written by the serving thread.
    clients = {"level": level if level == "DEBUG" else "WARNING"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"app": formatter},
        "filters": {"no_codes": {"()": f"{__name__}.NoSignInCodes"}},
        "handlers": {"app": handler},
        "root": {"level": level, "handlers": ["app"]},
        "loggers": {
            "uvicorn": quiet,
            "uvicorn.error": quiet,
            "uvicorn.access": {**quiet, "filters": ["no_codes"]},
            "httpx": clients,
            "httpx2": clients,
        },
    }


def tool_failure(failed: ToolErrorFormatterArgs[Any]) -> None:
    """The runs' `tool_error_formatter`: a tool that raised is logged at WARNING, with where and why.

    openai-agents tells the model only "An error occurred while running the tool" and logs the exception nowhere
    (only at DEBUG, without it, unless OPENAI_AGENTS_DONT_LOG_TOOL_DATA=0 logs the arguments too), so an owner's
    failing tool would fail silently. Returns None: the model reads the SDK's own message, which shows no secret.
    openai-agents 0.24 passes tool exceptions here; 0.21 to 0.23 only approval and unknown-tool errors.
    """
    error = getattr(failed, "error", None)  # not in openai-agents 0.21 to 0.23
    if failed.kind != "tool_exception" or error is None:
        return None
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (raised at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
    message = "Tool %s failed, so the model was told only that an error occurred: %s: %s%s"
    logger.warning(message, failed.tool_name, type(error).__name__, error, where, exc_info=error)
    return None
