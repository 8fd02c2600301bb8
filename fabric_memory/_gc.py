"""Pausing the cyclic garbage collector while parsed JSON is built and read."""

from __future__ import annotations

import gc


def no_cyclic_gc() -> _CyclicGcPause:
    """Pause the cyclic garbage collector while parsed sessions are built and read (a
    context manager).

    Parsed JSON is tens of thousands of acyclic objects per megabyte, alive until the work
    is done: every collection on the way rescans them and frees nothing (a fifth of a
    compaction cycle of a 1 MiB file; twice the certification's run time). Reference
    counting frees them afterwards anyway.
    """
    return _CyclicGcPause()


class _CyclicGcPause:
    # Not a ``@contextmanager`` generator: finishing one allocates (its StopIteration) just
    # after the collector is back on, which starts a collection of everything the paused
    # work built, the result its caller is about to take included.
    __slots__ = ("_enabled",)

    def __enter__(self) -> None:
        self._enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *_: object) -> None:
        if self._enabled:
            gc.enable()
