"""ExtStorage provider directories on the nodes of a virtual cluster (``gnt-storage`` tests)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["SCRIPTS", "make_provider"]

#: the scripts a valid provider has (Ganeti's ES_SCRIPTS less the optional ones)
SCRIPTS = ("create", "remove", "grow", "attach", "detach", "setinfo", "verify")


def make_provider(vc: Any, node: str, name: str, *, params: str = "",
                  skip: Sequence[str] = ()) -> str:
    """Create provider ``name`` in the first ExtStorage directory of ``node``:
    executable scripts (less ``skip``) and ``parameters.list`` with ``params``.
    Returns its canonical path (the one the cluster reports)."""
    base = vc.paths(node).es_search_path[0]
    pdir = os.path.join(base, name)
    os.makedirs(pdir, exist_ok=True)
    for script in SCRIPTS:
        if script not in skip:
            path = os.path.join(pdir, script)
            with open(path, "w") as fobj:
                fobj.write("#!/bin/sh\nexit 0\n")
            os.chmod(path, 0o755)
    with open(os.path.join(pdir, "parameters.list"), "w") as fobj:
        fobj.write(params)
    return f"/srv/ganeti/extstorage/{name}"
