"""Chorus testing layer."""
