"""The iallocator protocol and the built-in allocator (doc/protocols/iallocator.md).

* :mod:`~ganeti.iallocator.document`: the input document (version 2) and
  the request of each type;
* :mod:`~ganeti.iallocator.answer`: parsing and checking an answer;
* :mod:`~ganeti.iallocator.runner`: running an allocator (an external
  program found in the search path, or the built-in one) on a document;
* :mod:`~ganeti.iallocator.model` and :mod:`~ganeti.iallocator.builtin`:
  the built-in allocator, a pure function from document to answer;
* :mod:`~ganeti.iallocator.plan`: an evacuation answer as dependent jobs,
  and the N+1 state after each job (``--plan``).
"""
