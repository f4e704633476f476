"""The node's ``/proc/meminfo``, read once per call."""

from __future__ import annotations

__all__ = ["meminfo"]


def meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    """Each ``/proc/meminfo`` figure in bytes (empty when unreadable)."""
    result: dict[str, int] = {}
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                words = rest.split()
                if words and words[0].isdigit():
                    result[key] = int(words[0]) * (1024 if words[1:] == ["kB"] else 1)
    except OSError:
        return {}
    return result
