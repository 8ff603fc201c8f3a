"""Chorus daemon layer."""
