"""Bounds shared by the floor of the house (the events and the config's defaults)."""

#: Default cap on one serialized event or frame (1 MiB).
MAX_EVENT_BYTES = 1 << 20
