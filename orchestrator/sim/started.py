"""When this process began, on `time.monotonic`'s clock: the simulated import phase counts from then.

A real SGLang's import phase begins when its interpreter starts, so the interpreter's own start and the
simulator's imports are part of the scenario's `import_s`, not extra time on top of it. Only the standard
library's builtins are imported here: it runs before anything else in the launched process.
"""

from __future__ import annotations

import os
import time


def process_started() -> float:
    """`time.monotonic()` at this process's exec (Linux /proc), else now.

    /proc gives the start in clock ticks since boot (10 ms each). The start is taken one tick late, so the
    age is never overstated: the simulated phase may last up to a tick more than the scenario says, never less.
    """
    now = time.monotonic()
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        # Field 22 of stat(5) is starttime; fields[0] after the command name is field 3.
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - (int(fields[19]) + 1) / ticks
    except (OSError, IndexError, ValueError):
        return now
    return now - max(0.0, age)
