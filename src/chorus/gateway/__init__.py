"""Chorus gateway layer."""
