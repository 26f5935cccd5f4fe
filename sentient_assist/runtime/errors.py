"""Every exception the framework raises, in one place. Users import them from
`sentient_assist.exceptions`, whose docstring draws their tree."""

from typing import Any


class ProcessorError(Exception):
    """Base class of the framework's exceptions."""


class AgentError(ProcessorError):
    """An agent called the API with something the wire cannot carry."""


class ResponseStreamClosedError(ProcessorError):
    """The response was completed (or its client went away); nothing more can be sent."""


class TextStreamClosedError(ProcessorError):
    """The text stream was completed; no chunk can follow its last one."""


class AgentNotFoundError(ProcessorError):
    """The configured agent cannot be found or built."""


class SettingsError(ProcessorError):
    """A setting from the environment or `.env` has a value that cannot be used."""


class RemoteAgentError(ProcessorError):
    """An agent served over HTTP could not be run: a refused request, or a stream cut before `done`."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ModelProviderError(ProcessorError):
    """The language model's provider failed; `error_code` and `details` are what the user is shown."""

    def __init__(self, message: str, error_code: int = 502, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code
        self.details = details or {}


class UsageLimitExceeded(ModelProviderError):
    """A language-model run reached one of its UsageLimits (turns, tokens) and was stopped."""

    def __init__(self, message: str, limit: str) -> None:
        super().__init__(message, 400, {"limit": limit})


class CallRefused(ProcessorError):
    """An agent-to-agent call was refused: too deep, a loop, or not allowed.

    `reason` is one of "depth", "loop", "blocked"; `error_code` is what the user is shown.
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.error_code = 403 if reason == "blocked" else 508


class NoRouteError(ProcessorError, LookupError):
    """No routing rule matched and the router has no default agent."""


class ToolError(ProcessorError):
    """Raised by a tool to fail with a message meant for the user and the model, shown as is."""
