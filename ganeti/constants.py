"""Names and enumerations shared by every layer (no logic here).

Values follow Ganeti's published formats (described in doc/protocols/, see
doc/README.md) so that existing tools keep working.
"""

from __future__ import annotations

VERSION_MAJOR = 3
VERSION_MINOR = 0
VERSION_REVISION = 0
RELEASE_VERSION = "3.0.0"
#: What ``--version`` prints, for every ``gnt-*`` tool and daemon (Ganeti's text;
#: ``%(prog)s`` is the program's name, as argparse fills it in).
VERSION_LINE = "%(prog)s (ganeti) " + RELEASE_VERSION
# Protocol version as Ganeti builds it: major*1000000 + minor*10000 + rev.
PROTOCOL_VERSION = VERSION_MAJOR * 1000000 + VERSION_MINOR * 10000 + VERSION_REVISION
CONFIG_VERSION = PROTOCOL_VERSION
OS_API_V10 = 10
OS_API_V15 = 15
OS_API_V20 = 20
OS_API_VERSIONS = frozenset([OS_API_V10, OS_API_V15, OS_API_V20])
EXPORT_VERSION = 0
# Exports (doc/exports.md): config.ini and its sections, as upstream writes them
EXPORT_CONF_FILE = "config.ini"
INISECT_EXP = "export"
INISECT_INS = "instance"
INISECT_HYP = "hypervisor"
INISECT_BEP = "backend"
INISECT_OSP = "os"
INISECT_OSP_PRIVATE = "os_private"
EXPORT_MODE_LOCAL = "local"
EXPORT_MODE_REMOTE = "remote"
EXPORT_MODES = frozenset([EXPORT_MODE_LOCAL, EXPORT_MODE_REMOTE])

# Daemons and ports
MASTERD = "ganeti-masterd"
NODED = "ganeti-noded"
RAPI = "ganeti-rapi"
WATCHER = "ganeti-watcher"
#: the instance metadata service (doc/images.md, "The metadata service")
METAD = "ganeti-metad"
#: where instances reach it (cloud-init's and upstream's link-local address), and its port
METAD_ADDRESS = "169.254.169.254"
METAD_PORT = 80
#: where this node's ganeti-metad listens instead (tests, a node without the address)
ENV_METAD_BIND = "GANETI_METAD_BIND"
ENV_METAD_PORT = "GANETI_METAD_PORT"
DEFAULT_NODED_PORT = 1811
DEFAULT_RAPI_PORT = 5080
DAEMON_LOG_NAMES = {
    MASTERD: "master-daemon.log",
    NODED: "node-daemon.log",
    RAPI: "rapi-daemon.log",
    WATCHER: "watcher.log",
    METAD: "meta-daemon.log",
}
RAPI_ACCESS_LOG = "rapi-access.log"

# Environment variables that place a node (virtual cluster support)
ENV_ROOTDIR = "GANETI_ROOTDIR"
ENV_HOSTNAME = "GANETI_HOSTNAME"
ENV_NODED_PORT = "GANETI_NODED_PORT"
ENV_RAPI_PORT = "GANETI_RAPI_PORT"
#: the address ganeti-rapi listens on when bootstrap starts it (default: all addresses)
ENV_RAPI_BIND = "GANETI_RAPI_BIND"
#: the local address node RPC connections are made from (a virtual node's own
#: address, so that partitions can be made per node: doc/vcluster.md)
ENV_SOURCE_ADDRESS = "GANETI_SOURCE_ADDRESS"
#: the kvm hypervisor's acceleration on a node: "auto" (default: KVM when /dev/kvm
#: opens, else TCG), "kvm" or "tcg" (doc/kvm.md, "Acceleration")
ENV_KVM_ACCEL = "GANETI_KVM_ACCEL"

# Job and opcode statuses (doc/protocols/jobs.md, "Statuses")
JOB_STATUS_QUEUED = "queued"
JOB_STATUS_WAITING = "waiting"
JOB_STATUS_CANCELING = "canceling"
JOB_STATUS_RUNNING = "running"
JOB_STATUS_CANCELED = "canceled"
JOB_STATUS_SUCCESS = "success"
JOB_STATUS_ERROR = "error"
JOBS_FINALIZED = frozenset([JOB_STATUS_CANCELED, JOB_STATUS_SUCCESS, JOB_STATUS_ERROR])
JOB_STATUS_ALL = frozenset([
    JOB_STATUS_QUEUED, JOB_STATUS_WAITING, JOB_STATUS_CANCELING,
    JOB_STATUS_RUNNING, JOB_STATUS_CANCELED, JOB_STATUS_SUCCESS, JOB_STATUS_ERROR,
])
OP_STATUS_QUEUED = JOB_STATUS_QUEUED
OP_STATUS_WAITING = JOB_STATUS_WAITING
OP_STATUS_CANCELING = JOB_STATUS_CANCELING
OP_STATUS_RUNNING = JOB_STATUS_RUNNING
OP_STATUS_CANCELED = JOB_STATUS_CANCELED
OP_STATUS_SUCCESS = JOB_STATUS_SUCCESS
OP_STATUS_ERROR = JOB_STATUS_ERROR
OPS_FINALIZED = JOBS_FINALIZED

# Priorities: lower number = higher priority
OP_PRIO_HIGHEST = -20
OP_PRIO_HIGH = -10
OP_PRIO_NORMAL = 0
OP_PRIO_LOW = 10
OP_PRIO_LOWEST = 19
OP_PRIO_DEFAULT = OP_PRIO_NORMAL
OP_PRIO_SUBMIT_VALID = frozenset([OP_PRIO_LOW, OP_PRIO_NORMAL, OP_PRIO_HIGH])

# Opcode log entry types
ELOG_MESSAGE = "message"
ELOG_MESSAGE_LIST = "message-list"
ELOG_REMOTE_IMPORT = "remote-import"
ELOG_JQUEUE_TEST = "jqueue-test"
#: OP_TEST_JQUEUE's notifications (Ganeti's ``gnt-debug test-jobqueue`` protocol):
#: the log message is ``[socket path, test, argument]``
JQT_EXPANDNAMES = "expandnames"
JQT_EXEC = "exec"
JQT_STARTMSG = "startmsg"
JQT_LOGMSG = "logmsg"
JQT_ALL = frozenset([JQT_EXPANDNAMES, JQT_EXEC, JQT_STARTMSG, JQT_LOGMSG])
#: prefix of OP_TEST_JQUEUE's test messages in that protocol
JQT_MSGPREFIX = "TESTMSG="
ELOG_DELAY_TEST = "delay-test"
#: typed progress of a long operation: the message is a dict (doc/progress.md)
ELOG_PROGRESS = "progress"

# Job queue
JOB_QUEUE_VERSION = 1
# Unarchived jobs (finished or not): past the soft limit the oldest finished
# ones are archived once submissions pause; a submission that would pass the
# hard limit archives them itself, and is refused if that is not enough
# (doc/protocols/jobs.md, "Queue size").
JOB_QUEUE_SIZE_HARD_LIMIT = 5000
JOB_QUEUE_SIZE_SOFT_LIMIT = 4000
JOB_QUEUE_ARCHIVE_DIRS = 10000
LUXI_DEF_CTMO = 30
LUXI_DEF_RWTO = 180
LUXI_WFJC_TIMEOUT = (LUXI_DEF_RWTO - 1) // 2
LUXI_MAX_MESSAGE = 16 * 1024 * 1024
DEFAULT_JOB_WORKERS = 25

# Query result statuses and field kinds (doc/protocols/query.md, "Result cells")
RS_NORMAL = 0
RS_UNKNOWN = 1
RS_NODATA = 2
RS_UNAVAIL = 3
RS_OFFLINE = 4
QFT_UNKNOWN = "unknown"
#: exit code of a gnt-* list / list-fields asked for an unknown field (Ganeti's)
EXIT_UNKNOWN_FIELD = 14
QFT_TEXT = "text"
QFT_BOOL = "bool"
QFT_NUMBER = "number"
QFT_UNIT = "unit"
QFT_TIMESTAMP = "timestamp"
QFT_OTHER = "other"
#: a float (Ganeti 3.0: ndp/cpu_speed)
QFT_FLOAT = "float"
QR_CLUSTER = "cluster"
QR_INSTANCE = "instance"
QR_NODE = "node"
QR_LOCK = "lock"
QR_GROUP = "group"
QR_OS = "os"
QR_JOB = "job"
QR_EXPORT = "export"
QR_NETWORK = "network"
QR_FILTER = "filter"
QR_EXTSTORAGE = "extstorage"

# Hypervisors
HT_XEN_PVM = "xen-pvm"
HT_XEN_HVM = "xen-hvm"
HT_KVM = "kvm"
HT_LXC = "lxc"
HT_FAKE = "fake"
HT_CHROOT = "chroot"
HYPER_TYPES = frozenset([HT_XEN_PVM, HT_XEN_HVM, HT_KVM, HT_LXC, HT_FAKE, HT_CHROOT])
#: Hypervisors that can live-migrate an instance together with its local (``file``)
#: disks (``gnt-instance migrate --with-disks``, doc/kvm.md "Migration with disks").
HTS_DISK_MIRROR = frozenset([HT_KVM])
#: the kvm hvparams ``firmware`` and ``tpm`` (doc/kvm.md, "UEFI and TPM")
HT_KVM_FIRMWARE_BIOS = "bios"
HT_KVM_FIRMWARE_UEFI = "uefi"
HT_KVM_TPM_NONE = "none"
HT_KVM_TPM_TPM2 = "tpm2"
#: kvm ``cloud_init_source`` (doc/images.md, "Where the guest reads it"): the NoCloud
#: seed cdrom, or the metadata service named in the SMBIOS serial number
HT_KVM_CLOUD_INIT_SEED = "seed"
HT_KVM_CLOUD_INIT_METAD = "metad"

# Disk templates
DT_DISKLESS = "diskless"
DT_FILE = "file"
DT_SHARED_FILE = "sharedfile"
DT_PLAIN = "plain"
#: how a volume's label naming its instance starts, Ganeti's ``originstname+<instance>``
#: (an LVM tag of ``plain`` volumes, set at creation and moved by a rename)
DISK_INFO_PREFIX = "originstname+"
DT_BLOCK = "blockdev"
DT_DRBD8 = "drbd"
DT_RBD = "rbd"
DT_EXT = "ext"
DT_GLUSTER = "gluster"
DT_MIXED = "mixed"
DISK_TEMPLATES = frozenset([DT_DISKLESS, DT_FILE, DT_SHARED_FILE, DT_PLAIN,
                            DT_BLOCK, DT_DRBD8, DT_RBD, DT_EXT, DT_GLUSTER])
DTS_INT_MIRROR = frozenset([DT_DRBD8])
DTS_EXT_MIRROR = frozenset([DT_SHARED_FILE, DT_RBD, DT_EXT, DT_GLUSTER, DT_BLOCK, DT_DISKLESS])
DTS_FILEBASED = frozenset([DT_FILE, DT_SHARED_FILE, DT_GLUSTER])
#: the templates whose disks are LVM volumes in the cluster's volume group
DTS_LVM = frozenset([DT_PLAIN, DT_DRBD8])
#: templates whose disks a running instance can be exported from a snapshot of
DTS_SNAPSHOT_CAPABLE = frozenset([DT_PLAIN])
DISK_RDWR = "rw"
DISK_RDONLY = "ro"
#: a disk's local data as blockdev_find reports it (Ganeti's ldisk status)
LDS_OKAY = "ok"
LDS_UNKNOWN = "unknown"
LDS_FAULTY = "faulty"
#: DRBD: the TCP ports the cluster hands out (Ganeti's tcpudp_port_pool range) and
#: the minors a node may use
FIRST_DRBD_PORT = 11000
LAST_DRBD_PORT = 14999
MAX_DRBD_MINOR = 255
#: the DRBD usermode helper a cluster that enables drbd gets at init (Ganeti's default)
DEFAULT_DRBD_HELPER = "/bin/true"
#: MiB of the metadata volume of every DRBD disk, as Ganeti's
DRBD_META_SIZE = 128
#: replace-disks modes (Ganeti's): the volumes on the primary, on the secondary, a new
#: secondary node, or whatever side is degraded
REPLACE_DISK_PRI = "replace_on_primary"
REPLACE_DISK_SEC = "replace_on_secondary"
REPLACE_DISK_CHG = "replace_new_secondary"
REPLACE_DISK_AUTO = "replace_auto"
REPLACE_MODES = frozenset([REPLACE_DISK_PRI, REPLACE_DISK_SEC, REPLACE_DISK_CHG,
                           REPLACE_DISK_AUTO])

# Storage types (gnt-node list-storage, RAPI /2/nodes/[node]/storage; doc/storage.md)
ST_FILE = "file"
ST_SHARED_FILE = "sharedfile"
ST_LVM_PV = "lvm-pv"
ST_LVM_VG = "lvm-vg"
ST_DISKLESS = "diskless"
ST_BLOCK = "blockdev"
ST_RADOS = "rados"
ST_EXT = "ext"
ST_GLUSTER = "gluster"
STORAGE_TYPES = frozenset([ST_FILE, ST_SHARED_FILE, ST_LVM_PV, ST_LVM_VG, ST_DISKLESS,
                           ST_BLOCK, ST_RADOS, ST_EXT, ST_GLUSTER])
#: the storage types whose units this project can list (the others: a clear error)
STS_REPORT = frozenset([ST_FILE, ST_SHARED_FILE, ST_LVM_PV, ST_LVM_VG])
#: the disk template whose storage a storage type is
STORAGE_TYPE_TEMPLATE = {ST_FILE: DT_FILE, ST_SHARED_FILE: DT_SHARED_FILE, ST_LVM_PV: DT_PLAIN,
                         ST_LVM_VG: DT_PLAIN}
# storage unit fields
SF_NODE = "node"
SF_TYPE = "type"
SF_NAME = "name"
SF_SIZE = "size"
SF_USED = "used"
SF_FREE = "free"
SF_ALLOCATABLE = "allocatable"
VALID_STORAGE_FIELDS = (SF_NODE, SF_TYPE, SF_NAME, SF_SIZE, SF_USED, SF_FREE, SF_ALLOCATABLE)
#: the fields a storage type lets ``modify-storage`` change (Ganeti: LVM PVs only)
MODIFIABLE_STORAGE_FIELDS: dict[str, frozenset[str]] = {ST_LVM_PV: frozenset([SF_ALLOCATABLE])}
# storage operations (``repair-storage``; Ganeti: LVM VGs only)
SO_FIX_CONSISTENCY = "fix-consistency"
VALID_STORAGE_OPERATIONS: dict[str, frozenset[str]] = {
    ST_LVM_VG: frozenset([SO_FIX_CONSISTENCY])}

# Instance states
ADMINST_UP = "up"
ADMINST_DOWN = "down"
ADMINST_OFFLINE = "offline"
ADMINST_ALL = frozenset([ADMINST_UP, ADMINST_DOWN, ADMINST_OFFLINE])
ADMIN_SOURCE = "admin"
USER_SOURCE = "user"
#: in the error of a start/stop refused for its ``expected_admin_state``
#: (doc/protocols/opcodes.md); the watcher logs such a refusal as a skip
ADMIN_STATE_CHANGED = "admin state changed"
INSTST_RUNNING = "running"
INSTST_ADMINDOWN = "ADMIN_down"
INSTST_ADMINOFFLINE = "ADMIN_offline"
INSTST_ERRORUP = "ERROR_up"
INSTST_ERRORDOWN = "ERROR_down"
INSTST_NODEDOWN = "ERROR_nodedown"
INSTST_NODEOFFLINE = "ERROR_nodeoffline"
INSTST_WRONGNODE = "ERROR_wrongnode"
INSTST_USERDOWN = "USER_down"
INSTST_ALL = frozenset([INSTST_RUNNING, INSTST_ADMINDOWN, INSTST_ADMINOFFLINE,
                        INSTST_ERRORUP, INSTST_ERRORDOWN, INSTST_NODEDOWN,
                        INSTST_NODEOFFLINE, INSTST_WRONGNODE, INSTST_USERDOWN])

# Node roles (list field codes)
NR_MASTER = "M"
NR_MCANDIDATE = "C"
NR_REGULAR = "R"
NR_DRAINED = "D"
NR_OFFLINE = "O"

# NIC modes
NIC_MODE_BRIDGED = "bridged"
NIC_MODE_ROUTED = "routed"
NIC_MODE_OVS = "openvswitch"
NIC_VALID_MODES = frozenset([NIC_MODE_BRIDGED, NIC_MODE_ROUTED, NIC_MODE_OVS])

# Instance communication (doc/networks.md, "Instance communication"): the NIC
# ``ganeti:communication:<instance>`` on the cluster's instance communication
# network, a link-local network connected routed to every node group; the
# node gives that NIC's tap the address 169.254.169.254 and routes the NIC's
# address to it
INSTANCE_COMMUNICATION_NIC_PREFIX = "ganeti:communication:"
INSTANCE_COMMUNICATION_MAC_PREFIX = "52:54:00"
INSTANCE_COMMUNICATION_NETWORK4 = "169.254.0.0/16"
INSTANCE_COMMUNICATION_NETWORK6 = "fe80::/10"
INSTANCE_COMMUNICATION_NETWORK_MODE = NIC_MODE_ROUTED
INSTANCE_COMMUNICATION_NETWORK_LINK = "communication_rt"
#: the node's address on every instance communication tap, and its broadcast
INSTANCE_COMMUNICATION_TAP_ADDRESS = "169.254.169.254"
INSTANCE_COMMUNICATION_TAP_BROADCAST = "169.254.255.255"

# Misc enumerations
REBOOT_SOFT = "soft"
REBOOT_HARD = "hard"
REBOOT_FULL = "full"
REBOOT_TYPES = frozenset([REBOOT_SOFT, REBOOT_HARD, REBOOT_FULL])
HT_MIGRATION_LIVE = "live"
HT_MIGRATION_NONLIVE = "non-live"
HT_MIGRATION_MODES = frozenset([HT_MIGRATION_LIVE, HT_MIGRATION_NONLIVE])
NODE_EVAC_PRI = "primary-only"
NODE_EVAC_SEC = "secondary-only"
NODE_EVAC_ALL = "all"
NODE_EVAC_MODES = (NODE_EVAC_PRI, NODE_EVAC_SEC, NODE_EVAC_ALL)
# OP_TEST_ALLOCATOR: show the input document, or run the allocator on it
IALLOCATOR_DIR_IN = "in"
IALLOCATOR_DIR_OUT = "out"
IALLOCATOR_DIRECTIONS = (IALLOCATOR_DIR_IN, IALLOCATOR_DIR_OUT)
INSTANCE_CREATE = "create"
INSTANCE_IMPORT = "import"
INSTANCE_REMOTE_IMPORT = "remote-import"
ALLOC_POLICY_PREFERRED = "preferred"
ALLOC_POLICY_LAST_RESORT = "last_resort"
ALLOC_POLICY_UNALLOCABLE = "unallocable"
VALID_ALLOC_POLICIES = (ALLOC_POLICY_PREFERRED, ALLOC_POLICY_LAST_RESORT,
                        ALLOC_POLICY_UNALLOCABLE)
TAG_CLUSTER = "cluster"
TAG_NODEGROUP = "nodegroup"
TAG_NODE = "node"
TAG_INSTANCE = "instance"
TAG_NETWORK = "network"
VALID_TAG_TYPES = frozenset([TAG_CLUSTER, TAG_NODEGROUP, TAG_NODE, TAG_INSTANCE, TAG_NETWORK])
MAX_TAG_LEN = 128
MAX_TAGS_PER_OBJ = 4096

# Instance limits (as Ganeti): NICs and disks one instance may have
MAX_NICS = 8
MAX_DISKS = 16

# Hooks
HOOKS_VERSION = 2
HOOKS_PHASE_PRE = "pre"
HOOKS_PHASE_POST = "post"
HKR_SKIP = 0
HKR_FAIL = 1
HKR_SUCCESS = 2
HTYPE_CLUSTER = "CLUSTER"
HTYPE_NODE = "NODE"
HTYPE_GROUP = "GROUP"
HTYPE_INSTANCE = "INSTANCE"
HTYPE_NETWORK = "NETWORK"

# Default cluster values
DEFAULT_CANDIDATE_POOL_SIZE = 10
DEFAULT_MAC_PREFIX = "aa:00:00"
DEFAULT_BRIDGE = "xen-br0"
DEFAULT_SHUTDOWN_TIMEOUT = 120

# Out-of-band node management (doc/oob.md): the commands of the ``oob_program``
# node parameter, the health item statuses it may report, and the limits
OOB_POWER_ON = "power-on"
OOB_POWER_OFF = "power-off"
OOB_POWER_CYCLE = "power-cycle"
OOB_POWER_STATUS = "power-status"
OOB_HEALTH = "health"
OOB_COMMANDS = (OOB_POWER_ON, OOB_POWER_OFF, OOB_POWER_CYCLE, OOB_POWER_STATUS, OOB_HEALTH)
#: the key of ``power-status``'s answer
OOB_POWER_STATUS_POWERED = "powered"
OOB_STATUS_OK = "OK"
OOB_STATUS_WARNING = "WARNING"
OOB_STATUS_CRITICAL = "CRITICAL"
OOB_STATUS_UNKNOWN = "UNKNOWN"
OOB_STATUSES = (OOB_STATUS_OK, OOB_STATUS_WARNING, OOB_STATUS_CRITICAL, OOB_STATUS_UNKNOWN)
#: seconds the program may run before it is killed; seconds between two power-ons
OOB_TIMEOUT = 60
OOB_POWER_DELAY = 2.0
