"""Chorus policy layer."""
