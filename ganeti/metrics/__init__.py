"""Counters, gauges and histograms, and their OpenMetrics text (doc/metrics.md).

Pure and small: a :class:`Registry` holds metric families; code that
observes an event calls :meth:`Counter.inc`, :meth:`Gauge.set` or
:meth:`Histogram.observe` with label values; figures that are cheaper to
read when asked (jobs by status, replication lag) come from *collectors*,
functions called at each :meth:`Registry.snapshot`.

A snapshot is plain JSON data (what LUXI ``QueryMetrics`` answers), a list
of families::

    {"name": "ganeti_rpc_latency_seconds", "type": "histogram",
     "help": "...", "unit": "seconds",
     "samples": [{"labels": {"procedure": "node_info"},
                  "buckets": [[0.005, 3], ..., ["+Inf", 9]], "count": 9, "sum": 0.12}]}

(counter and gauge samples carry ``"value"``).  :func:`render_openmetrics`
turns a snapshot into the OpenMetrics 1.0 text exposition, and
:func:`format_lines` into lines for an operator; neither needs the
registry, so a front end renders what it got over LUXI.

Thread safety: one lock per family; observing is a dict lookup and an add.
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = ["Registry", "Counter", "Gauge", "Histogram", "Collector", "render_openmetrics",
           "format_lines", "OPENMETRICS_CONTENT_TYPE", "LATENCY_BUCKETS"]

#: The Content-Type of :func:`render_openmetrics` output.
OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"

#: Default buckets (seconds) for latencies, from a millisecond to ten minutes.
LATENCY_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0)

#: A collector returns ``[(label values dict, value), ...]`` for one gauge family.
Collector = Callable[[], Iterable[tuple[dict[str, str], float]]]

_TYPES = ("counter", "gauge", "histogram")


class _Family:
    kind = ""

    def __init__(self, name: str, help_text: str, labels: Sequence[str], unit: str) -> None:
        self.name = name
        self.help = help_text
        self.labels = tuple(labels)
        self.unit = unit
        self._lock = threading.Lock()

    def _key(self, labels: dict[str, str]) -> tuple[str, ...]:
        if set(labels) != set(self.labels):
            raise ValueError(f"{self.name}: labels {sorted(labels)} != {sorted(self.labels)}")
        return tuple(str(labels[k]) for k in self.labels)

    def _head(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.kind, "help": self.help, "unit": self.unit}


class Counter(_Family):
    """A count that only grows (rendered with the ``_total`` suffix)."""

    kind = "counter"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._values: dict[tuple[str, ...], float] = {}

    def inc(self, by: float = 1.0, **labels: str) -> None:
        """Add ``by`` (>= 0) to the sample of ``labels``."""
        if by < 0:
            raise ValueError(f"{self.name}: a counter cannot go down")
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + by

    def value(self, **labels: str) -> float:
        """The current value (0 when never incremented)."""
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            items = sorted(self._values.items())
        return {**self._head(), "samples": [{"labels": dict(zip(self.labels, k)), "value": v}
                                            for k, v in items]}


class Gauge(_Family):
    """A value that goes up and down; set directly or by a collector."""

    kind = "gauge"

    def __init__(self, *args: Any, collector: Collector | None = None, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._values: dict[tuple[str, ...], float] = {}
        self._collector = collector

    def set(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = float(value)

    def value(self, **labels: str) -> float | None:
        """The current value of ``labels`` (collected now for a collector gauge)."""
        key = self._key(labels)
        for sample in self.snapshot()["samples"]:
            if tuple(str(sample["labels"][k]) for k in self.labels) == key:
                return float(sample["value"])
        return None

    def snapshot(self) -> dict[str, Any]:
        if self._collector is not None:
            items = sorted((self._key(labels), float(v)) for labels, v in self._collector())
        else:
            with self._lock:
                items = sorted(self._values.items())
        return {**self._head(), "samples": [{"labels": dict(zip(self.labels, k)), "value": v}
                                            for k, v in items]}


class Histogram(_Family):
    """Observations counted into cumulative buckets, with their count and sum."""

    kind = "histogram"

    def __init__(self, *args: Any, buckets: Sequence[float] = LATENCY_BUCKETS, **kw: Any) -> None:
        super().__init__(*args, **kw)
        if list(buckets) != sorted(set(buckets)) or not buckets:
            raise ValueError(f"{self.name}: buckets must be increasing")
        self.bounds = tuple(float(b) for b in buckets)
        # per label key: [count per bucket (the last: above every bound)], sum
        self._values: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}

    def observe(self, value: float, **labels: str) -> None:
        key = self._key(labels)
        idx = bisect.bisect_left(self.bounds, value)
        with self._lock:
            entry = self._values.get(key)
            if entry is None:
                entry = self._values[key] = ([0] * (len(self.bounds) + 1), [0.0])
            entry[0][idx] += 1
            entry[1][0] += value

    def count(self, **labels: str) -> int:
        """How many observations ``labels`` has."""
        with self._lock:
            entry = self._values.get(self._key(labels))
            return sum(entry[0]) if entry is not None else 0

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            items = sorted((k, (list(c), s[0])) for k, (c, s) in self._values.items())
        samples = []
        for key, (counts, total) in items:
            running, buckets = 0, []
            for bound, n in zip([*self.bounds, "+Inf"], counts):
                running += n
                buckets.append([bound, running])
            samples.append({"labels": dict(zip(self.labels, key)), "buckets": buckets,
                            "count": running, "sum": total})
        return {**self._head(), "samples": samples}


class Registry:
    """The metric families of one daemon, by name (each name registered once)."""

    def __init__(self) -> None:
        self._families: dict[str, Counter | Gauge | Histogram] = {}
        self._lock = threading.Lock()

    def _add(self, family: Any) -> Any:
        with self._lock:
            if family.name in self._families:
                raise ValueError(f"metric {family.name} registered twice")
            self._families[family.name] = family
        return family

    def counter(self, name: str, help_text: str, labels: Sequence[str] = (),
                unit: str = "") -> Counter:
        return self._add(Counter(name, help_text, labels, unit))

    def gauge(self, name: str, help_text: str, labels: Sequence[str] = (), unit: str = "",
              collector: Collector | None = None) -> Gauge:
        return self._add(Gauge(name, help_text, labels, unit, collector=collector))

    def histogram(self, name: str, help_text: str, labels: Sequence[str] = (), unit: str = "",
                  buckets: Sequence[float] = LATENCY_BUCKETS) -> Histogram:
        return self._add(Histogram(name, help_text, labels, unit, buckets=buckets))

    def get(self, name: str) -> Counter | Gauge | Histogram:
        return self._families[name]

    def snapshot(self) -> list[dict[str, Any]]:
        """Every family as plain data, sorted by name (collectors run now)."""
        with self._lock:
            families = sorted(self._families.items())
        return [family.snapshot() for _, family in families]


# --- rendering -------------------------------------------------------------------

def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: Any) -> str:
    if value == "+Inf" or value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def _labels(labels: dict[str, Any], extra: tuple[str, str] | None = None) -> str:
    pairs = [(k, str(v)) for k, v in labels.items()]
    if extra is not None:
        pairs.append(extra)
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in pairs) + "}"


def render_openmetrics(snapshot: Sequence[dict[str, Any]]) -> bytes:
    """The OpenMetrics 1.0 text of a snapshot, ending with ``# EOF``.

    Raises :class:`ValueError` for a family of unknown type.
    """
    out: list[str] = []
    for fam in snapshot:
        name, kind = fam["name"], fam["type"]
        if kind not in _TYPES:
            raise ValueError(f"metric {name}: unknown type {kind!r}")
        out.append(f"# TYPE {name} {kind}")
        if fam.get("unit"):
            out.append(f"# UNIT {name} {fam['unit']}")
        out.append(f"# HELP {name} {_escape(fam.get('help', ''))}")
        for sample in fam["samples"]:
            labels = sample["labels"]
            if kind == "counter":
                out.append(f"{name}_total{_labels(labels)} {_number(sample['value'])}")
            elif kind == "gauge":
                out.append(f"{name}{_labels(labels)} {_number(sample['value'])}")
            else:
                for bound, count in sample["buckets"]:
                    le = _number(float(bound)) if bound != "+Inf" else "+Inf"
                    if le != "+Inf" and "." not in le and "e" not in le:
                        le += ".0"      # OpenMetrics: canonical float for le
                    out.append(f"{name}_bucket{_labels(labels, ('le', le))} {count}")
                out.append(f"{name}_count{_labels(labels)} {sample['count']}")
                out.append(f"{name}_sum{_labels(labels)} {_number(float(sample['sum']))}")
    out.append("# EOF")
    return ("\n".join(out) + "\n").encode("utf-8")


def format_lines(snapshot: Sequence[dict[str, Any]]) -> list[str]:
    """Lines for an operator: one per sample, histograms as count/sum/mean."""
    lines: list[str] = []
    for fam in snapshot:
        lines.append(f"{fam['name']} ({fam['type']}): {fam.get('help', '')}")
        if not fam["samples"]:
            lines.append("  (no samples)")
        for sample in fam["samples"]:
            where = ", ".join(f"{k}={v}" for k, v in sample["labels"].items()) or "-"
            if fam["type"] == "histogram":
                count, total = sample["count"], float(sample["sum"])
                mean = total / count if count else 0.0
                lines.append(f"  {where}: count {count}, sum {total:.6g}, mean {mean:.6g}")
            else:
                lines.append(f"  {where}: {_number(sample['value'])}")
    return lines
