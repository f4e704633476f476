"""The gnt-* start-up path stays lean: no typing, shlex or query field tables at import."""

from __future__ import annotations

import subprocess
import sys


def test_gnt_tools_do_not_import_typing_at_start_up() -> None:
    # typing (and contextlib, which it pulls in) costs a CLI process ~5 ms;
    # annotations only need it under TYPE_CHECKING.
    code = ("import sys; import ganeti.client.gnt_debug, ganeti.client.gnt_job, "
            "ganeti.client.gnt_cluster, ganeti.client.gnt_node, ganeti.luxi; "
            "print([m for m in ('typing', 'shlex', 'ganeti.query', 'dataclasses') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "[]"


def test_cli_command_alias_exists_at_run_time() -> None:
    from ganeti import cli
    assert cli.Command is tuple
    assert cli.build_query_filter([], False) is None
