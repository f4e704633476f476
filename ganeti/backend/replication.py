"""One RPC per master candidate for each replication push of the master.

``replicate_state(config, ssconf_values, queue_files)`` does, in this
order, what ``upload_file`` of ``config.data`` (here compressed), ``write_ssconf_files`` and
``jobqueue_update_many`` do separately, with the same checks (allow-list,
ssconf key syntax, queue directory confinement).  The master's replicator
(``ganeti.replication.Replicator``) sends it to the candidates so that a
config change and the job files committed meanwhile cost one forked
request per candidate instead of three (doc/design/replication.md).

Every part is attempted even when an earlier one fails; the failures are
reported together.  The reply is the node's non-empty hook directory
names (as ``hooks_list``), so the master learns them without another call.
"""

from __future__ import annotations

from ganeti import errors
from ganeti.backend.context import NodeContext
from ganeti.rpc.procedure import FAST, procedure
from ganeti.backend.files import MAX_UPLOAD_SIZE, upload_bytes, write_ssconf_files
from ganeti.backend.hooks import hooks_list
from ganeti.backend.jobqueue import jobqueue_update_many
from ganeti.utils import payload

__all__ = ["replicate_state"]

CONFIG_FILE_MODE = 0o640


@procedure(FAST, fenced=True)
def replicate_state(ctx: NodeContext, config: list | None, ssconf_values: dict | None,
                    queue_files: list) -> list[str]:
    """One replication push to a master candidate: write config ([canonical name, content] or
    null), ssconf values (or null) and queue files like upload_file, write_ssconf_files and
    jobqueue_update_many. -> hooks_list

    Write the pushed config, ssconf values and queue files; hook dir names.

    ``config`` is None or ``[canonical_file_name, content]`` (an
    allow-listed file, written with mode 0640), ``content`` either the
    plain text or ``[encoding, data]`` (:mod:`ganeti.utils.payload`; the
    master sends zlib + base64), written as exactly the decoded bytes;
    ``ssconf_values`` None or
    ``{key: text}``; ``queue_files`` ``[[file_name, content], ...]``.
    Raises :class:`errors.OpExecError` naming every part that failed.
    """
    problems: list[str] = []
    if config is not None:
        if not isinstance(config, list) or len(config) != 2 or not isinstance(config[0], str):
            problems.append(f"invalid config entry (expected [file_name, content]):"
                            f" {str(config)[:100]}")
        else:
            try:
                data = payload.decode_payload(config[1], MAX_UPLOAD_SIZE)
                upload_bytes(ctx, config[0], data, CONFIG_FILE_MODE, None, None, None)
            except errors.GanetiError as exc:
                problems.append(f"config {config[0]}: {exc}")
    if ssconf_values is not None:
        if not isinstance(ssconf_values, dict):
            problems.append("ssconf values must be an object")
        else:
            try:
                write_ssconf_files(ctx, ssconf_values)
            except errors.GanetiError as exc:
                problems.append(str(exc))
    if queue_files:
        try:
            jobqueue_update_many(ctx, queue_files)
        except errors.GanetiError as exc:
            problems.append(str(exc))
    if problems:
        raise errors.OpExecError("; ".join(problems))
    return hooks_list(ctx)
