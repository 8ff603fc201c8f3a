"""Chorus bodies layer."""
