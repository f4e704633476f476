"""The development harness: virtual clusters of real daemons (doc/vcluster.md).

It lives outside the ``ganeti`` package (nothing in ``ganeti/`` imports it,
and it calls only public functions of ganeti modules; checked by
``test/tools/test_harness_boundary.py``):

* :mod:`tools.harness.vcluster`: create, start, stop and destroy a virtual
  cluster (the ``tools/vcluster`` command);
* :mod:`tools.harness.sshserver`: a small paramiko SSH server, one per
  virtual node (no root, no system sshd needed);
* :mod:`tools.harness.tinylinux`: the tiny Linux guest the kvm tests boot
  (doc/kvm.md).
"""
