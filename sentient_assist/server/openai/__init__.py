"""The OpenAI-compatible face: POST /v1/chat/completions and GET /v1/models (docs/openai.md)."""
