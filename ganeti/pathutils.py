"""Every filesystem path the code uses, derived from one root directory.

The root comes from ``GANETI_ROOTDIR`` (default ``/``); that is how many
virtual nodes share one machine.  Build a :class:`Paths` once (usually with
:func:`get_paths`) and pass it down; never join absolute paths by hand.
"""

from __future__ import annotations

import os

from ganeti import constants

__all__ = ["Paths", "get_paths", "job_file_name", "archived_job_file_name"]


class Paths:
    """All paths of one node, below ``root`` (immutable, compared by root).

    A plain class rather than a frozen dataclass: the CLI imports this
    module at start-up, and :mod:`dataclasses` costs more than the whole
    rest of a ``gnt-*`` command's imports (doc/cli-startup.md).
    """

    __slots__ = ("root",)
    root: str

    def __init__(self, root: str = "/") -> None:
        object.__setattr__(self, "root", root)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Paths is immutable (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Paths is immutable (cannot delete {name!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Paths) and other.root == self.root

    def __hash__(self) -> int:
        return hash((Paths, self.root))

    def __repr__(self) -> str:
        return f"Paths(root={self.root!r})"

    def __reduce__(self) -> tuple[type[Paths], tuple[str]]:
        return (Paths, (self.root,))    # copy and pickle through __init__

    def _p(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    # directories
    @property
    def data_dir(self) -> str:
        return self._p("var", "lib", "ganeti")

    @property
    def run_dir(self) -> str:
        return self._p("var", "run", "ganeti")

    @property
    def os_image_dir(self) -> str:
        """OS images staged on a node for an install (doc/images.md)."""
        return os.path.join(self.data_dir, "os-images")

    @property
    def os_image_store_dir(self) -> str:
        """The master's image store: ``index.json`` and ``images/<name>`` (doc/images.md)."""
        return os.path.join(self.data_dir, "os-image-store")

    @property
    def os_image_store_index(self) -> str:
        """The store's index, also kept by the master candidates (doc/images.md)."""
        return os.path.join(self.os_image_store_dir, "index.json")

    @property
    def os_image_cache_dir(self) -> str:
        """A node's copies of store images, named by their sha256 (doc/images.md)."""
        return os.path.join(self.data_dir, "os-image-cache")

    @property
    def cloud_init_dir(self) -> str:
        """The instances' cloud-init NoCloud seeds on a node (doc/images.md)."""
        return os.path.join(self.data_dir, "cloud-init")

    def cloud_init_seed(self, instance_name: str) -> str:
        """The NoCloud seed ISO of an instance, attached as a cdrom when it exists."""
        return os.path.join(self.cloud_init_dir, f"{instance_name}.iso")

    @property
    def metadata_dir(self) -> str:
        """The metadata service's entries on a node, one per instance (doc/images.md)."""
        return os.path.join(self.data_dir, "metadata")

    def metadata_entry(self, instance_name: str) -> str:
        """An instance's entry for ``ganeti-metad`` (mode 0600: it holds the user-data)."""
        return os.path.join(self.metadata_dir, f"{instance_name}.json")

    @property
    def kvm_firmware_dir(self) -> str:
        """The kvm instances' UEFI NVRAM and TPM state on a node (doc/kvm.md, "UEFI and TPM")."""
        return os.path.join(self.data_dir, "kvm-firmware")

    @property
    def socket_dir(self) -> str:
        return os.path.join(self.run_dir, "socket")

    @property
    def log_dir(self) -> str:
        return self._p("var", "log", "ganeti")

    @property
    def conf_dir(self) -> str:
        return self._p("etc", "ganeti")

    @property
    def hooks_base_dir(self) -> str:
        return os.path.join(self.conf_dir, "hooks")

    @property
    def file_storage_dir(self) -> str:
        return self._p("srv", "ganeti", "file-storage")

    @property
    def shared_file_storage_dir(self) -> str:
        return self._p("srv", "ganeti", "shared-file-storage")

    @property
    def export_dir(self) -> str:
        """Where ``gnt-backup export`` puts exports: ``<export_dir>/<instance>/``."""
        return self._p("srv", "ganeti", "export")

    @property
    def import_export_dir(self) -> str:
        """State of the disk transfers running on this node (one directory each)."""
        return os.path.join(self.run_dir, "import-export")

    @property
    def crypto_dir(self) -> str:
        """The keys and certificates of moves between clusters (one directory each)."""
        return os.path.join(self.run_dir, "crypto")

    @property
    def os_search_path(self) -> list[str]:
        return [self._p("srv", "ganeti", "os"),
                self._p("usr", "local", "lib", "ganeti", "os"),
                self._p("usr", "lib", "ganeti", "os"),
                self._p("usr", "share", "ganeti", "os")]

    @property
    def es_search_path(self) -> list[str]:
        """Where ExtStorage providers are looked for (Ganeti's ``ES_SEARCH_PATH``)."""
        return [self._p("srv", "ganeti", "extstorage"),
                self._p("usr", "local", "lib", "ganeti", "extstorage"),
                self._p("usr", "lib", "ganeti", "extstorage"),
                self._p("usr", "share", "ganeti", "extstorage")]

    @property
    def iallocator_search_path(self) -> list[str]:
        """Upstream's directories, then the project's own (``/etc/ganeti/iallocators``)."""
        return [self._p("usr", "local", "lib", "ganeti", "iallocators"),
                self._p("usr", "lib", "ganeti", "iallocators"),
                self._p("etc", "ganeti", "iallocators")]

    @property
    def file_storage_paths_file(self) -> str:
        return os.path.join(self.conf_dir, "file-storage-paths")

    @property
    def queue_dir(self) -> str:
        return os.path.join(self.data_dir, "queue")

    @property
    def queue_archive_dir(self) -> str:
        return os.path.join(self.queue_dir, "archive")

    @property
    def rapi_users_dir(self) -> str:
        return os.path.join(self.data_dir, "rapi")

    @property
    def hypervisor_state_dir(self) -> str:
        return os.path.join(self.run_dir, "fake-hypervisor")

    @property
    def kvm_run_dir(self) -> str:
        """One directory per kvm instance: pid file, QMP/serial sockets, runtime state."""
        return os.path.join(self.run_dir, "kvm-hypervisor")

    @property
    def instance_disks_dir(self) -> str:
        return os.path.join(self.run_dir, "instance-disks")

    @property
    def os_log_dir(self) -> str:
        return os.path.join(self.log_dir, "os")

    # files
    @property
    def config_file(self) -> str:
        return os.path.join(self.data_dir, "config.data")

    @property
    def server_pem(self) -> str:
        return os.path.join(self.data_dir, "server.pem")

    @property
    def client_pem(self) -> str:
        return os.path.join(self.data_dir, "client.pem")

    @property
    def rapi_pem(self) -> str:
        return os.path.join(self.data_dir, "rapi.pem")

    @property
    def rapi_users_file(self) -> str:
        return os.path.join(self.rapi_users_dir, "users")

    @property
    def rapi_tokens_file(self) -> str:
        """The RAPI API tokens (digests only; doc/rapi.md, "API tokens")."""
        return os.path.join(self.rapi_users_dir, "tokens")

    @property
    def confd_hmac_key(self) -> str:
        return os.path.join(self.data_dir, "hmac.key")

    @property
    def cluster_domain_secret(self) -> str:
        return os.path.join(self.data_dir, "cluster-domain-secret")

    @property
    def known_hosts_file(self) -> str:
        return os.path.join(self.data_dir, "known_hosts")

    @property
    def ssh_key_file(self) -> str:
        return os.path.join(self.data_dir, "id_cluster")

    @property
    def authorized_keys_file(self) -> str:
        """The node's SSH ``authorized_keys`` (of ``root``'s home below the node root)."""
        return self._p("root", ".ssh", "authorized_keys")

    @property
    def master_socket(self) -> str:
        return os.path.join(self.socket_dir, "ganeti-master")

    @property
    def query_socket(self) -> str:
        """Ganeti 2.10+'s LUXI path for queries and jobs (luxid's): a link to
        :attr:`master_socket` made by the master daemon (doc/compat.md)."""
        return os.path.join(self.socket_dir, "ganeti-query")

    @property
    def queue_serial_file(self) -> str:
        return os.path.join(self.queue_dir, "serial")

    @property
    def queue_version_file(self) -> str:
        return os.path.join(self.queue_dir, "version")

    @property
    def queue_lock_file(self) -> str:
        return os.path.join(self.queue_dir, "lock")

    @property
    def queue_drain_file(self) -> str:
        return os.path.join(self.queue_dir, "drain")

    @property
    def watcher_pause_file(self) -> str:
        return os.path.join(self.data_dir, "watcher.pause")

    @property
    def watcher_lock_file(self) -> str:
        """Held (``flock``) by the running watcher, so that only one runs per node."""
        return os.path.join(self.run_dir, "ganeti-watcher.lock")

    @property
    def watcher_instance_status_file(self) -> str:
        """``name status`` lines of every instance, written by the master's watcher."""
        return os.path.join(self.data_dir, "instance-status")

    @property
    def watcher_hooks_dir(self) -> str:
        """The scripts the watcher runs on every pass (doc/watcher.md)."""
        return os.path.join(self.hooks_base_dir, "watcher")

    @property
    def vnode_boot_id_file(self) -> str:
        """A virtual node's boot id (below a root other than ``/`` only)."""
        return self._p("boot_id")

    def watcher_state_file(self, group_uuid: str) -> str:
        """The watcher's state of one node group (``watcher.<uuid>.data``)."""
        return os.path.join(self.data_dir, f"watcher.{group_uuid}.data")

    def ssconf_file(self, key: str) -> str:
        """Path of ``ssconf_<key>``."""
        return os.path.join(self.data_dir, f"ssconf_{key}")

    def pid_file(self, daemon: str) -> str:
        """Path of the pid file of ``daemon`` (e.g. ``ganeti-noded``)."""
        return os.path.join(self.run_dir, f"{daemon}.pid")

    def log_file(self, name: str) -> str:
        """Path of the log file ``name`` (e.g. ``node-daemon.log``)."""
        return os.path.join(self.log_dir, name)

    def daemon_log_file(self, daemon: str) -> str:
        """Path of the log file of ``daemon``."""
        return self.log_file(constants.DAEMON_LOG_NAMES.get(daemon, f"{daemon}.log"))

    def hooks_dir(self, hpath: str, phase: str) -> str:
        """Directory of the ``phase`` ("pre"/"post") scripts of hook ``hpath``."""
        return os.path.join(self.hooks_base_dir, f"{hpath}-{phase}.d")

    def contains(self, path: str) -> bool:
        """True when ``path`` (after resolving ``..``) lies below the root."""
        root = os.path.realpath(self.root)
        real = os.path.realpath(path)
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def job_file_name(queue_dir: str, job_id: int) -> str:
    """Path of an unarchived job file."""
    return os.path.join(queue_dir, f"job-{job_id}")


def archived_job_file_name(archive_dir: str, job_id: int) -> str:
    """Path of an archived job file (``archive/<id // 10000>/job-<id>``)."""
    return os.path.join(archive_dir, str(job_id // constants.JOB_QUEUE_ARCHIVE_DIRS),
                        f"job-{job_id}")


_PATHS_CACHE: dict[str, Paths] = {}


def _paths_for(root: str) -> Paths:
    paths = _PATHS_CACHE.get(root)
    if paths is None:
        if len(_PATHS_CACHE) >= 16:
            _PATHS_CACHE.clear()
        paths = _PATHS_CACHE[root] = Paths(root=root)
    return paths


def get_paths(root: str | None = None) -> Paths:
    """The paths for ``root``, or for ``$GANETI_ROOTDIR`` (default ``/``)."""
    if root is None:
        root = os.environ.get(constants.ENV_ROOTDIR) or "/"
    return _paths_for(os.path.abspath(root))


# --- master IP setup (appended) ----------------------------------------------------

def external_master_setup_script(paths: Paths) -> str:
    """The cluster's own master IP setup script (``use_external_mip_script``).

    ``<root>/etc/ganeti/scripts/master-ip-setup``; the default script
    shipped with the package is ``ganeti/tools/master_ip_setup.py``.
    """
    return os.path.join(paths.conf_dir, "scripts", "master-ip-setup")


__all__ += ["external_master_setup_script"]
