"""Admin tools (front-end layer): burnin, the iallocator runner, the master IP setup.

The development harness (virtual clusters, their SSH server, the tinylinux
guest) is not part of the product: it lives in ``tools/harness/``.
"""
