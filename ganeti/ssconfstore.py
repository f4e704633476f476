"""Reading the ``ssconf_*`` files: :class:`SimpleStore`.

doc/cli-startup.md: the ``gnt-*`` commands read ssconf (``gnt-cluster
getmaster``, the master's name), so this module imports nothing beyond
:mod:`ganeti.errors`; computing and writing the files is
:mod:`ganeti.ssconf`'s (the master and node daemons).
"""

from __future__ import annotations

from ganeti import errors
from ganeti.utils.bounded import read_limited

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (CLI start-up)
if TYPE_CHECKING:
    from ganeti.pathutils import Paths

__all__ = ["SSCONF_KEYS", "MAX_SIZE", "SimpleStore"]

#: the largest ssconf file read (bytes)
MAX_SIZE = 4 * 1024 * 1024

SSCONF_KEYS = (
    "cluster_name", "cluster_tags", "enabled_user_shutdown", "file_storage_dir",
    "shared_file_storage_dir", "gluster_storage_dir", "hypervisor_list",
    "instance_list", "maintain_node_health", "master_candidates",
    "master_candidates_certs", "master_candidates_ips", "master_ip",
    "master_netdev", "master_netmask", "master_node", "node_list",
    "node_primary_ips", "node_secondary_ips", "node_vm_capable", "nodegroups",
    "networks", "offline_nodes", "online_nodes", "primary_ip_family",
    "release_version", "ssh_ports", "uid_pool",
)


class SimpleStore:
    """Reads the ``ssconf_*`` files of one node.

    Every getter raises :class:`errors.ConfigurationError` when its file is
    missing or unreadable.
    """

    def __init__(self, paths: Paths) -> None:
        self._paths = paths

    def read(self, key: str) -> str:
        """The raw text of ``ssconf_<key>`` (surrounding whitespace removed)."""
        path = self._paths.ssconf_file(key)
        try:
            with open(path, "rb") as fh:
                data = read_limited(fh, MAX_SIZE)
        except FileNotFoundError as exc:
            raise errors.ConfigurationError(
                f"ssconf file {path} is missing; is this node part of a cluster?") from exc
        except OSError as exc:
            raise errors.ConfigurationError(f"Cannot read ssconf file {path}: {exc}") from exc
        if len(data) > MAX_SIZE:
            raise errors.ConfigurationError(
                f"Cannot read ssconf file {path}: larger than {MAX_SIZE} bytes")
        try:
            return data.decode("utf-8").strip()
        except UnicodeDecodeError as exc:
            raise errors.ConfigurationError(f"Cannot read ssconf file {path}: {exc}") from exc

    def read_lines(self, key: str) -> list[str]:
        """The non-empty lines of ``ssconf_<key>``."""
        return [line.strip() for line in self.read(key).splitlines() if line.strip()]

    def _pairs(self, key: str, sep: str) -> dict[str, str]:
        result = {}
        for line in self.read_lines(key):
            name, _, value = line.partition(sep)
            result[name.strip()] = value.strip()
        return result

    @staticmethod
    def _bool(text: str) -> bool:
        return text.strip().lower() == "true"

    def get_cluster_name(self) -> str:
        return self.read("cluster_name")

    def get_master_node(self) -> str:
        return self.read("master_node")

    def get_master_ip(self) -> str:
        return self.read("master_ip")

    def get_master_netdev(self) -> str:
        return self.read("master_netdev")

    def get_master_netmask(self) -> int:
        return int(self.read("master_netmask") or 32)

    def get_node_list(self) -> list[str]:
        return self.read_lines("node_list")

    def get_online_nodes(self) -> list[str]:
        return self.read_lines("online_nodes")

    def get_offline_nodes(self) -> list[str]:
        return self.read_lines("offline_nodes")

    def get_master_candidates(self) -> list[str]:
        return self.read_lines("master_candidates")

    def get_master_candidates_ips(self) -> list[str]:
        return self.read_lines("master_candidates_ips")

    def get_node_primary_ips(self) -> dict[str, str]:
        """``{node name: primary ip}``."""
        return self._pairs("node_primary_ips", " ")

    def get_node_secondary_ips(self) -> dict[str, str]:
        """``{node name: secondary ip}``."""
        return self._pairs("node_secondary_ips", " ")

    def get_node_vm_capable(self) -> dict[str, bool]:
        return {k: self._bool(v) for k, v in self._pairs("node_vm_capable", "=").items()}

    def get_ssh_ports(self) -> dict[str, int]:
        return {k: int(v) for k, v in self._pairs("ssh_ports", "=").items()}

    def get_nodegroups(self) -> dict[str, str]:
        """``{group uuid: group name}``."""
        return self._pairs("nodegroups", " ")

    def get_instance_list(self) -> list[str]:
        return self.read_lines("instance_list")

    def get_hypervisor_list(self) -> list[str]:
        return self.read_lines("hypervisor_list")

    def get_hvparams(self, hypervisor: str) -> dict[str, str]:
        """Cluster-level hv parameters of ``hypervisor`` (values as text)."""
        return self._pairs(f"hvparams_{hypervisor}", "=")

    def get_file_storage_dir(self) -> str:
        return self.read("file_storage_dir")

    def get_shared_file_storage_dir(self) -> str:
        return self.read("shared_file_storage_dir")

    def get_release_version(self) -> str:
        return self.read("release_version")

    def get_cluster_tags(self) -> list[str]:
        return self.read_lines("cluster_tags")

    def get_primary_ip_family(self) -> int:
        return int(self.read("primary_ip_family") or 2)

    def get_maintain_node_health(self) -> bool:
        return self._bool(self.read("maintain_node_health"))

    def get_enabled_user_shutdown(self) -> bool:
        return self._bool(self.read("enabled_user_shutdown"))

    def get_uid_pool(self) -> list[str]:
        return self.read_lines("uid_pool")
