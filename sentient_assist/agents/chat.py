"""A language model that chats: configured by MODEL_NAME, MODEL_BASE_URL and MODEL_API_KEY, no tools.
MODEL_NAME=local with no MODEL_BASE_URL runs a GGUF model in the process instead (the `local`
extra; MODEL_GGUF_PATH)."""

from sentient_assist import LLMAgent, ModelSettings, OpenAIChatModel, Settings, load_settings
from sentient_assist.llm import ChatModel, LocalChatModel

LOCAL = "local"  # MODEL_NAME that, with MODEL_BASE_URL empty, runs the model in the process

SYSTEM_PROMPT = "You are a helpful assistant. Answer clearly and concisely."


def agent() -> LLMAgent:
    settings = load_settings()
    return LLMAgent(
        name="chat",
        description="A language model (MODEL_NAME) that chats; no tools.",
        model=chat_model(settings),
        system_prompt=SYSTEM_PROMPT,
        model_settings=ModelSettings(temperature=settings.model_temperature, max_tokens=settings.model_max_tokens),
    )


def chat_model(settings: Settings) -> ChatModel:
    """The model server's (MODEL_BASE_URL), or, for MODEL_NAME=local without one, the process's own."""
    if settings.model_name == LOCAL and not settings.model_base_url:
        return LocalChatModel.from_settings(settings)
    return OpenAIChatModel.from_settings(settings)
