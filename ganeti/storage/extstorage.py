"""ExtStorage providers, node side: find them and tell whether each is usable.

An ExtStorage provider (Ganeti's interface for external storage,
``gnt-storage``) is a directory ``<search dir>/<name>`` of
``paths.es_search_path`` holding the executable scripts ``create``,
``remove``, ``grow``, ``attach``, ``detach``, ``setinfo`` and ``verify``,
optionally ``snapshot``, ``open`` and ``close`` (executable when present),
and the file ``parameters.list`` (``name description`` lines: the
parameters the provider takes).  A provider is *valid* when all of these
hold; otherwise its diagnosis names the first file that is wrong.

The checks are pure (:func:`check_files`, :func:`parse_parameters`, on a
:class:`FileState` per file name); :func:`search`, :func:`probe` and
:func:`diagnose` are the thin shell that reads the directories.  Nothing
here runs a script: there is no ``ext`` disk template yet (doc/compat.md).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["REQUIRED_SCRIPTS", "OPTIONAL_SCRIPTS", "PARAMETERS_FILE", "FileState",
           "ProviderStatus", "check_files", "parse_parameters", "search", "probe", "diagnose"]

#: the scripts every provider has (Ganeti's ``ES_SCRIPTS`` less the optional ones)
REQUIRED_SCRIPTS = ("create", "remove", "grow", "attach", "detach", "setinfo", "verify")
#: scripts a provider may lack (later additions to the interface)
OPTIONAL_SCRIPTS = ("snapshot", "open", "close")
#: the provider's parameters, one ``name description`` line each (required)
PARAMETERS_FILE = "parameters.list"


@dataclass(frozen=True)
class FileState:
    """What one file of a provider directory is: a regular file, executable by its owner."""

    regular: bool
    executable: bool


@dataclass(frozen=True)
class ProviderStatus:
    """One provider directory of one node, as ``gnt-storage diagnose`` shows it.

    ``diagnose`` is "" when ``valid``, else the reason; ``parameters`` are
    ``(name, doc)`` pairs from ``parameters.list`` (empty when invalid).
    """

    name: str
    path: str
    valid: bool
    diagnose: str = ""
    parameters: tuple[tuple[str, str], ...] = ()


def check_files(shown_path: str, files: Mapping[str, FileState | None]) -> str:
    """The first problem of a provider's files, or "" when it is valid.

    ``files`` maps each name of :data:`REQUIRED_SCRIPTS`,
    :data:`OPTIONAL_SCRIPTS` and :data:`PARAMETERS_FILE` to its state, None
    (or absent) when the file does not exist; ``shown_path`` is the
    directory as the message names it.  Checked in that order: a required
    file missing, any present file not regular, a script not executable.
    """
    required = (*REQUIRED_SCRIPTS, PARAMETERS_FILE)
    for name in (*REQUIRED_SCRIPTS, *OPTIONAL_SCRIPTS, PARAMETERS_FILE):
        state = files.get(name)
        if state is None:
            if name in required:
                return f"File '{name}' under path '{shown_path}' is missing"
            continue
        if not state.regular:
            return f"File '{name}' under path '{shown_path}' is not a regular file"
        if name != PARAMETERS_FILE and not state.executable:
            return f"File '{name}' under path '{shown_path}' is not executable"
    return ""


def parse_parameters(text: str) -> tuple[tuple[str, str], ...]:
    """The ``(name, doc)`` pairs of a ``parameters.list`` text.

    A line is a name, blanks, then the description (which may be empty);
    blank lines are skipped.
    """
    pairs = []
    for line in text.splitlines():
        parts = line.split(None, 1)
        if parts:
            pairs.append((parts[0], parts[1].strip() if len(parts) > 1 else ""))
    return tuple(pairs)


def search(search_path: Sequence[str]) -> list[tuple[str, str]]:
    """``(name, path)`` of every visible entry of the search directories, in order.

    A directory that does not exist is skipped; entries that are not
    directories are listed too (:func:`diagnose` reports them invalid).
    """
    found: list[tuple[str, str]] = []
    for base_dir in search_path:
        try:
            names = sorted(os.listdir(base_dir))
        except OSError:
            continue
        found.extend((name, os.path.join(base_dir, name)) for name in names
                     if not name.startswith("."))
    return found


def probe(path: str) -> dict[str, FileState | None]:
    """The :class:`FileState` of every file :func:`check_files` looks at in ``path``."""
    states: dict[str, FileState | None] = {}
    for name in (*REQUIRED_SCRIPTS, *OPTIONAL_SCRIPTS, PARAMETERS_FILE):
        try:
            mode = os.stat(os.path.join(path, name)).st_mode
        except OSError:
            states[name] = None
            continue
        states[name] = FileState(regular=stat.S_ISREG(mode), executable=bool(mode & stat.S_IXUSR))
    return states


def diagnose(name: str, path: str, shown_path: str | None = None) -> ProviderStatus:
    """Check the provider directory ``path`` (messages name it as ``shown_path``)."""
    shown = path if shown_path is None else shown_path
    if not os.path.isdir(path):
        return ProviderStatus(name, shown, False,
                              f"Directory for ExtStorage provider {name} not found"
                              f" in search path (not a directory: {shown})")
    problem = check_files(shown, probe(path))
    if problem:
        return ProviderStatus(name, shown, False, problem)
    try:
        with open(os.path.join(path, PARAMETERS_FILE), encoding="utf-8",
                  errors="replace") as fobj:
            text = fobj.read()
    except OSError as exc:
        return ProviderStatus(name, shown, False,
                              f"Error while reading the parameters file at"
                              f" {os.path.join(shown, PARAMETERS_FILE)}: {exc.strerror}")
    return ProviderStatus(name, shown, True, "", parse_parameters(text))
