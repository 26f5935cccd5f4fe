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


class InputError(ProcessorError, ValueError):
    """A request a face cannot turn into a run, refused before anything runs.

    `field` names what to fix as the client wrote it (`messages[2].content`, `prompt`,
    `resume[0].interruptId`), `reason` says why, never quoting what was sent; the message is
    `field: reason`. `status` is the HTTP status it is refused with (400; 404 for a model that is
    not served; 409 for a pause answered before), and `code` a machine-readable code where the
    face's protocol has them (OpenAI's `model_not_found`). Every face's parsing raises it; each
    face renders it in its own protocol's shape.
    """

    def __init__(self, field: str | None, reason: str, *, status: int = 400, code: str | None = None) -> None:
        self.message = f"{field}: {reason}" if field else reason
        super().__init__(self.message)
        self.field = field
        self.reason = reason
        self.status = status
        self.code = code


class PauseRefused(InputError):
    """A resume whose pause token this service cannot honour (tampered, of another conversation
    or agent, expired) or that was answered before; the message says why, for the client, and
    `status` is the error's code: 400, 409 for a pause already answered, 503 when the answered
    pauses cannot be read. It names no field: a face that knows where the token rode says so."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(None, message, status=status)


class AgentRunError(ProcessorError):
    """A run stopped short of its answer; `message`, `error_code` and `details` are the `error`
    event the user is shown."""

    def __init__(self, message: str, error_code: int = 500, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code
        self.details = details or {}


class ModelProviderError(AgentRunError):
    """The language model's provider failed; `error_code` and `details` are what the user is shown."""

    def __init__(self, message: str, error_code: int = 502, details: dict[str, Any] | None = None) -> None:
        super().__init__(message, error_code, details)


class UsageLimitExceeded(AgentRunError):
    """A language-model run reached one of its UsageLimits (turns, tokens, output retries) and
    was stopped: the provider did not fail, the run's own bound did."""

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


class UnknownEventId(ProcessorError):
    """A resumable run's Last-Event-ID that the run never sent (400)."""


class StoreUnavailable(ProcessorError):
    """The store shared by the replicas does not answer: a resume cannot be served (503)."""


class QuotaReached(ProcessorError):
    """A key holds its quota of the store shared by the replicas (503): `setting` names the
    quota; `retry_after`, the seconds until the first of its entries there expires."""

    def __init__(self, setting: str, limit: int, retry_after: int) -> None:
        super().__init__(f"{setting} ({limit})")
        self.setting = setting
        self.limit = limit
        self.retry_after = retry_after
