"""What the workflow language and the decider know of each activity kind (pure data: no
activity code, no I/O): the table of declarations (`table`), the built-in kinds' models and
declarations (`steps`) and the provider options a model step may pass (`options`).

What runs a kind is added by `wovyr.activities.kinds.register_kind` (`wovyr.activities`).
"""

from __future__ import annotations

from wovyr.kinds import steps
from wovyr.kinds.table import DECLARED, Declaration, KindTable, Settle, declare

__all__ = ["DECLARED", "Declaration", "KindTable", "Settle", "declare", "steps"]
