"""What a job request must satisfy, checked by the client before it is sent (with no
daemon running) and by the daemon when it is received."""

from __future__ import annotations


def prompt_problem(prompt: str, limit: int) -> str | None:
    """Why ``prompt`` cannot be a job's prompt (too large), or None."""
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return (
        f"the prompt is {size:,} bytes; the limit is {limit:,} "
        "([daemon] max_prompt_bytes in config.toml)"
    )
