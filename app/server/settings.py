"""Settings, read once from the environment and `.env` (every one is in `.env.example`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.runtime.errors import SettingsError

ENV_PREFIX = "ASSIST_"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_file=".env", extra="ignore")

    agent: str = Field("showcase", description="An agent name from agents/ or a module:attr path.")
    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=1, le=65535, description="Port to listen on.")
    request_timeout: float = Field(300, gt=0, description="Seconds one request may run.")
    ping_interval: float = Field(15, gt=0, description="Seconds between keepalive comments.")
    log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = Field(
        "info", description="Log level."
    )


def load_settings(**overrides: object) -> Settings:
    """Settings from the environment, `.env` and `overrides`; a bad value names its variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = str(error["loc"][0]) if error["loc"] else "?"
            problems.append(f"{ENV_PREFIX}{field.upper()}={error.get('input')!r}: {error['msg']}")
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems)) from None
