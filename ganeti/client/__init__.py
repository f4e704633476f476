"""The ``gnt-*`` command line tools: one module per tool (``gnt_job``, ...).

Each module holds small verb functions ``(opts, args) -> int`` and a
``commands`` table, and a ``main(argv=None) -> int`` that hands both to
:func:`ganeti.cli.generic_main`.  The tools speak to the master only through
LUXI (opcodes and queries); they never import the master-side logic.
"""
