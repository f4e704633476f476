"""The gnt-* start-up path stays lean: no typing, shlex or query field tables at import."""

from __future__ import annotations

import subprocess
import sys


def test_gnt_tools_do_not_import_typing_at_start_up() -> None:
    # typing (and contextlib, which it pulls in) costs a CLI process ~5 ms;
    # annotations only need it under TYPE_CHECKING.
    code = ("import sys; import ganeti.client.gnt_debug, ganeti.client.gnt_job, "
            "ganeti.client.gnt_cluster, ganeti.client.gnt_node, ganeti.client.gnt_instance, "
            "ganeti.client.gnt_os, ganeti.client.gnt_backup, ganeti.luxi, ganeti.query.format; "
            "print([m for m in ('typing', 'shlex', 're', 'json', 'ganeti.query.fields', 'dataclasses') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "[]"


def test_cli_command_alias_exists_at_run_time() -> None:
    from ganeti import cli
    assert cli.Command is tuple
    assert cli.build_query_filter([], False) is None


def test_luxi_round_trip_does_not_import_json_or_re() -> None:
    # json imports re (and enum): ~4.6 ms per CLI process (doc/dependencies.md).
    # The serializer drives the C accelerator _json directly instead.
    code = ("import sys; from ganeti import luxi; "
            "frame = luxi.encode_request('QueryJobs', [[1], ['id']], None); "
            "res = luxi.parse_response(b'{\"success\": true, \"result\": [[1]]}'); "
            "assert frame.endswith(b'\\x03') and res == [[1]], (frame, res); "
            "print([m for m in ('json', 're', 'enum') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         timeout=60, check=False, env={"PYTHONPATH": _repo_root()})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _repo_root() -> str:
    import os
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
