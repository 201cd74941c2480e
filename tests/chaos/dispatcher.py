"""A schedule dispatcher process for the SIGKILL test: fires due schedules for SECONDS."""

from __future__ import annotations

import sys
import time

from wovyr.engine.engine import Engine
from wovyr.scheduling.schedules import Schedules
from wovyr.store.sqlite import SQLiteStore


def main() -> None:
    db, seconds = sys.argv[1], float(sys.argv[2])
    engine = Engine(SQLiteStore(db))
    schedules = Schedules(engine)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        schedules.dispatch_due()
        time.sleep(0.005)  # a dispatcher's poll interval
    engine.close()


if __name__ == "__main__":
    main()
