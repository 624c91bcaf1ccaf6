"""Model clients: how the engine talks to a language model (the ``react`` agent, the diagnosis
judge). One client today, for any OpenAI-compatible chat-completions endpoint."""

from sregym.models.chat import (
    DEFAULT_API_KEY_ENV,
    ChatClient,
    ChatResult,
    LLMConfigError,
    LLMError,
    LLMResponseError,
    LLMUnavailableError,
    ToolCallRequest,
    function_tool,
)

__all__ = ["DEFAULT_API_KEY_ENV", "ChatClient", "ChatResult", "LLMConfigError", "LLMError", "LLMResponseError",
           "LLMUnavailableError", "ToolCallRequest", "function_tool"]
