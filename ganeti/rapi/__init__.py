"""The Remote API v2: resources as data (:mod:`.resources`), users (:mod:`.users`).

A front end (layer 5): it builds opcodes and talks to the master daemon over
LUXI only; the HTTP wiring lives in :mod:`ganeti.server.rapi`.  See doc/rapi.md.
"""
