"""Bounds shared by the floor of the house (the events and the config's defaults)."""

#: Default cap on one serialized event or frame (1 MiB).
MAX_EVENT_BYTES = 1 << 20


def prompt_problem(prompt: str, limit: int) -> str | None:
    """Why ``prompt`` cannot be a job's prompt (empty, or too large), or None: checked
    by the client before it is sent (with no daemon running: none is started for it),
    by the daemon when it is received, and by the dashboard's form."""
    if not prompt.strip():
        return "the prompt is empty"
    size = len(prompt.encode("utf-8", "surrogatepass"))
    if size <= limit:
        return None
    return (
        f"the prompt is {size:,} bytes; the limit is {limit:,} "
        "([daemon] max_prompt_bytes in config.toml)"
    )
