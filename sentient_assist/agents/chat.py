"""A language model that chats: configured by MODEL_NAME, MODEL_BASE_URL and MODEL_API_KEY, no tools."""

from sentient_assist import LLMAgent, ModelSettings, OpenAIChatModel, load_settings

SYSTEM_PROMPT = "You are a helpful assistant. Answer clearly and concisely."


def agent() -> LLMAgent:
    settings = load_settings()
    return LLMAgent(
        name="chat",
        description="A language model (MODEL_NAME) that chats; no tools.",
        model=OpenAIChatModel.from_settings(settings),
        system_prompt=SYSTEM_PROMPT,
        model_settings=ModelSettings(temperature=settings.model_temperature, max_tokens=settings.model_max_tokens),
    )
