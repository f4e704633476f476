"""Type aliases shared across layers, kept in one place.

Plain assignments that need only ``collections.abc`` (no ``typing``);
modules on the CLI start-up path still import this one under
``TYPE_CHECKING`` only.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["FeedbackFn"]

#: Where a logical unit (or a helper it calls) sends operator messages;
#: the processor's job-log function (``Processor.log``) in the master.
FeedbackFn = Callable[[str], None]
