"""Chorus router layer."""
