"""Chorus store layer."""
