"""The frames of a traceback's text, and which of them are Wovyr's: a frame is the project's
when its file lies inside the installed `wovyr` package (by the package's own path, so the
answer does not depend on the name of the folder the project is checked out in)."""

from __future__ import annotations

import re
from pathlib import Path

import wovyr

__all__ = ["PACKAGE", "frame_files", "wovyr_frames"]

PACKAGE = Path(wovyr.__file__).resolve().parent
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+, in ', re.MULTILINE)


def frame_files(trace: str) -> list[Path]:
    """The file of each frame `trace` prints, in order."""
    return [Path(m.group("file")).resolve() for m in _FRAME.finditer(trace)]


def wovyr_frames(trace: str) -> list[Path]:
    """The frames of `trace` whose file is part of the installed `wovyr` package."""
    return [path for path in frame_files(trace) if path.is_relative_to(PACKAGE)]
