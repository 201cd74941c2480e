"""The pure core of the engine: state and its fold, the decider, items, saga and waits.

Nothing here reads a clock, does I/O, touches a store or runs an event loop: every time
comes from the caller or an event (an import-linter contract in `pyproject.toml` keeps it
so). The facade (`wovyr.engine`) and the workers (`wovyr.worker`) drive it.
"""
