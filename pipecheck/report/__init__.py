"""Renderings of a verification result: text for people, JSON for tools."""
