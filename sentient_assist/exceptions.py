"""Every exception the framework raises (sentient-agent-framework 0.3.0's `interface.exceptions`
and the rest), defined in `sentient_assist.runtime.errors`:

ProcessorError                  base of them all (as in sentient-agent-framework 0.3.0)
├── AgentError                  an agent misused the API: bad content, bad event name
├── ResponseStreamClosedError   an agent emitted after the response was completed
├── TextStreamClosedError       an agent emitted to a text stream it had completed
├── AgentNotFoundError          ASSIST_AGENT names no agent that can be loaded
├── SettingsError               a setting has a value that cannot be used
├── RemoteAgentError            an agent over HTTP refused the request or cut the stream
├── InputError                  a request a face cannot run: the field, the reason, the HTTP status
│   └── PauseRefused            a resume whose pause token does not hold, or was answered before
├── AgentRunError               a run stopped short: the error event the user is shown
│   ├── ModelProviderError      a language model's provider failed (bad key, rate limit, timeout)
│   └── UsageLimitExceeded      a language-model run reached its UsageLimits
├── CallRefused                 an agent-to-agent call was too deep, a loop, or not allowed
├── NoRouteError                no routing rule matched and there is no default agent
├── ToolError                   a tool failed with a message meant to be shown
├── UnknownEventId              a resume's Last-Event-ID that its run never sent
├── StoreUnavailable            the store the replicas share (Redis) does not answer
└── QuotaReached                a key holds its quota of the store the replicas share
"""

from sentient_assist.runtime.errors import (
    AgentError,
    AgentNotFoundError,
    AgentRunError,
    CallRefused,
    InputError,
    ModelProviderError,
    NoRouteError,
    PauseRefused,
    ProcessorError,
    QuotaReached,
    RemoteAgentError,
    ResponseStreamClosedError,
    SettingsError,
    StoreUnavailable,
    TextStreamClosedError,
    ToolError,
    UnknownEventId,
    UsageLimitExceeded,
)

__all__ = [
    "AgentError",
    "AgentNotFoundError",
    "AgentRunError",
    "CallRefused",
    "InputError",
    "ModelProviderError",
    "NoRouteError",
    "PauseRefused",
    "ProcessorError",
    "QuotaReached",
    "RemoteAgentError",
    "ResponseStreamClosedError",
    "SettingsError",
    "StoreUnavailable",
    "TextStreamClosedError",
    "ToolError",
    "UnknownEventId",
    "UsageLimitExceeded",
]
