"""Oracles: each test checks a number against a reference that shares no code with what it checks."""
