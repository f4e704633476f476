"""The kvm hypervisor: qemu-system-x86_64 controlled through QMP (doc/kvm.md)."""
