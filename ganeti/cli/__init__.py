"""The shared machinery of the ``gnt-*`` command line tools.

* :mod:`ganeti.cli.options`: ``*_OPT`` option objects, positional argument
  specs (``ArgJobId``...), ``-o`` field selection, priorities;
* :mod:`ganeti.cli.output`: printing, timestamps, query tables and filters;
* :mod:`ganeti.cli.failure`: the exit codes (0 ok, 1 failure, 2 usage, 14
  unknown field, 130 interrupted) and Ganeti's error texts;
* :mod:`ganeti.cli.jobs`: submitting opcodes, ``--submit``, following a
  job and printing its log;
* :mod:`ganeti.cli.verbs`: the ``list`` and ``list-fields`` verbs of a
  query resource;
* :mod:`ganeti.cli.main`: :func:`generic_main` (a commands table -> a tool).

Each imports only those above it in this list (``test/test_layering.py``
checks that the graph has no cycle).  Start-up time matters (one process
per command), so these modules import only the foundation at load time;
LUXI, opcodes and the query package are imported when first used.
"""

from __future__ import annotations

from ganeti.cli.failure import (EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_SUCCESS,
                                EXIT_UNKNOWN_FIELD, EXIT_USAGE, format_error, format_job_error)
from ganeti.cli.jobs import (JOBS_UNFINISHED, follow_result_jobs, format_log_message,
                             get_client, job_result,
                             load_opcode_file, op_to_dict, poll_job, read_json_file,
                             send_job, set_generic_opcode_opts, submit_opcode_and_wait,
                             submit_opcode_files, submit_opcodes_and_wait, submit_or_send)
from ganeti.cli.main import Command, generic_main, usage_error
from ganeti.cli.options import (ARGS_MANY_JOBS, ARGS_NONE, ARGS_ONE_JOB, COMMON_OPTS, DEBUG_OPT,
                                DRY_RUN_OPT, FIELDS_OPT, FILTER_OPT, FORCE_OPT, NOHDR_OPT,
                                PRINT_JOBID_OPT, PRIORITY_NAMES, PRIORITY_OPT, REASON_OPT,
                                SEP_OPT, SUBMIT_OPT, TIMEOUT_OPT, UNITS_OPT, VERBOSE_OPT, Arg,
                                ArgFile, ArgJobId, ArgNode, ArgUnknown, Option, check_arguments,
                                parse_fields, parse_priority, parse_timespec, split_escaped)
from ganeti.cli.output import (build_query_filter, confirm, format_query_table, format_timestamp,
                               generic_query_list, merge_time, to_stderr, to_stdout)
from ganeti.cli.verbs import list_fields_verb, query_list_verb

__all__ = [
    # options
    "Option", "Arg", "ArgJobId", "ArgNode", "ArgFile", "ArgUnknown", "ARGS_NONE",
    "ARGS_MANY_JOBS", "ARGS_ONE_JOB", "COMMON_OPTS", "check_arguments", "parse_fields",
    "parse_priority", "parse_timespec", "split_escaped", "PRIORITY_NAMES",
    "SUBMIT_OPT", "PRINT_JOBID_OPT", "PRIORITY_OPT", "NOHDR_OPT", "SEP_OPT", "FIELDS_OPT",
    "UNITS_OPT", "FILTER_OPT", "VERBOSE_OPT", "DEBUG_OPT", "FORCE_OPT", "DRY_RUN_OPT",
    "REASON_OPT", "TIMEOUT_OPT",
    # failure
    "EXIT_SUCCESS", "EXIT_FAILURE", "EXIT_USAGE", "EXIT_UNKNOWN_FIELD", "EXIT_INTERRUPTED",
    "format_error",
    "format_job_error",
    # main
    "generic_main", "usage_error", "Command",
    # jobs
    "get_client", "op_to_dict", "set_generic_opcode_opts", "send_job", "poll_job",
    "follow_result_jobs", "format_log_message", "job_result", "submit_opcodes_and_wait", "submit_opcode_and_wait",
    "submit_or_send", "JOBS_UNFINISHED", "load_opcode_file", "submit_opcode_files",
    "read_json_file",
    # output
    "to_stdout", "to_stderr", "confirm", "format_query_table", "format_timestamp", "merge_time",
    "build_query_filter", "generic_query_list",
    # verbs
    "query_list_verb", "list_fields_verb",
]
