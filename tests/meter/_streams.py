"""One streamed request per model API, as a CLI sends it to the scripted model server
(path, JSON body): the meter's tests read the answers, ``bench/bench_meter.py``
times them straight and through the meter."""

from __future__ import annotations

__all__ = ["MODELS", "STREAMED"]

#: API -> the model each request names (the server's answer names it back).
MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5.5", "gemini": "gemini-2.5-flash"}

STREAMED: dict[str, tuple[str, dict[str, object]]] = {
    "anthropic": (
        "/v1/messages",
        {
            "model": MODELS["anthropic"],
            "max_tokens": 9,
            "stream": True,
            "messages": [{"role": "user", "content": "hi"}],
        },
    ),
    "openai": ("/v1/responses", {"model": MODELS["openai"], "stream": True, "input": "hi"}),
    "gemini": (
        f"/v1beta/models/{MODELS['gemini']}:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
}
