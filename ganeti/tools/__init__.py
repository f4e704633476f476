"""Admin and development tools (front-end layer).

* :mod:`ganeti.tools.sshserver`: a small paramiko SSH server, one per
  virtual node of ``tools/vcluster`` (no root, no system sshd needed)
"""
