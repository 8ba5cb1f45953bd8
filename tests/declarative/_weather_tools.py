"""Tools that specs in these tests name by import path."""

from __future__ import annotations

IMPORTED: list[str] = []


def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
