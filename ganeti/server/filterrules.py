"""The master's side of job filter rules: LUXI changes and the queue's copy.

The rules live in the configuration (``filters``, doc/jobfilters.md), so
they are written, replicated and carried over a master failover like any
other configuration change.  ``ReplaceFilter`` and ``DeleteFilter``
change them here, one at a time, and hand the new set to the job queue,
which applies it to queued jobs at once.  :func:`apply_rules` gives the
queue the configuration's rules when the master starts.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from ganeti import errors
from ganeti.context import MasterContext
from ganeti.jqueue import filters as jfilters

__all__ = ["FilterRules", "apply_rules"]

logger = logging.getLogger(__name__)

_UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

#: The reason trail entry the master adds to every rule it stores
#: (Ganeti's query daemon adds the same source).
REASON_SOURCE = "luxid"


def _stored_rules(context: MasterContext) -> list[jfilters.FilterRule]:
    rules = []
    for uuid, data in sorted(context.committed_cfg().get_filters().items()):
        try:
            rules.append(jfilters.rule_from_dict(data))
        except Exception as exc:   # a hand-edited configuration: skip, say so
            logger.error("Ignoring malformed job filter rule %s: %s", uuid, exc)
    return rules


def apply_rules(context: MasterContext) -> None:
    """Give the job queue the configuration's rules (at master start)."""
    context.require_jqueue().set_filter_rules(_stored_rules(context))


class FilterRules:
    """``ReplaceFilter``/``DeleteFilter`` for the LUXI handlers."""

    def __init__(self, context: MasterContext,
                 clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.context = context
        self._clock_ns = clock_ns
        self._lock = threading.Lock()     # the queue gets the sets in the config's order

    def replace(self, uuid: Any, priority: Any, predicates: Any, action: Any,
                reason: Any) -> str:
        """Add (``uuid`` None) or replace a rule; returns its UUID.

        The watermark is the highest job id in use now.  Bad input raises
        :class:`errors.ParameterError` and changes nothing.
        """
        if uuid is not None and (not isinstance(uuid, str) or not _UUID_RE.match(uuid)):
            raise errors.ParameterError(f"Unable to parse UUID {uuid!r}", errors.ECODE_INVAL)
        priority = jfilters.check_priority(priority)
        predicates = jfilters.check_predicates(predicates)
        action = jfilters.check_action(action)
        trail = jfilters.check_reason(reason) + [[REASON_SOURCE, "", self._clock_ns()]]
        cfg = self.context.require_cfg()
        queue = self.context.require_jqueue()
        with self._lock:
            rule = jfilters.FilterRule(uuid or cfg.generate_uuid(), queue.storage.last_id,
                                       priority, predicates, action, trail)
            cfg.set_filter(rule.to_dict())
            logger.info("Job filter rule %s set: %s, predicates %s", rule.uuid,
                        jfilters.action_text(rule.action), rule.predicates)
            apply_rules(self.context)
        return rule.uuid

    def delete(self, uuid: Any) -> None:
        """Remove a rule; :class:`errors.OpPrereqError` when there is none."""
        with self._lock:
            self.context.require_cfg().remove_filter(str(uuid))
            logger.info("Job filter rule %s removed", uuid)
            apply_rules(self.context)
