"""Image-based installs and cloud-init seeds on the node (doc/images.md).

An image reaches the node as a staging file, ``<data dir>/os-images/<instance>.image``:
pushed by the master chunk by chunk (``os_image_put_chunk``, a file of the
master's) or fetched by the node itself (``os_image_fetch``, an http(s)
URL).  ``os_image_inspect`` says what it is (format, sizes, sha256), the
master decides, and ``os_image_write`` converts it onto the instance's first
disk with ``qemu-img convert`` and removes it; ``os_image_remove`` drops it
when the install was refused.  The NoCloud seed of an instance is an ISO 9660
file ``<data dir>/cloud-init/<instance>.iso`` (volume id ``cidata``) made by
``genisoimage``; the kvm hypervisor attaches it as a cdrom when it exists.
The same documents go to ``<data dir>/metadata/<instance>.json`` (mode 0600)
for the instance metadata service, ``ganeti-metad`` (doc/images.md).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from typing import Any

from ganeti import errors
from ganeti.backend import blockdev
from ganeti.backend.context import NodeContext
from ganeti.impexp import cloudinit, metadata, osimage
from ganeti.rpc.procedure import FAST, NORMAL, SLOW, procedure
from ganeti.utils import validation
from ganeti.utils.process import run_command

__all__ = ["os_image_put_chunk", "os_image_fetch", "os_image_inspect", "os_image_write",
           "os_image_remove", "os_image_cache_stage", "os_image_cache_keep",
           "os_image_cache_remove", "instance_seed_build", "instance_seed_remove"]

#: largest chunk the master pushes in one call (before base64)
MAX_CHUNK = 8 * 1024 * 1024
FETCH_TIMEOUT = 30.0
WRITE_TIMEOUT = 3600.0


def _stage_path(ctx: NodeContext, instance_name: str) -> str:
    validation.check_hostname(instance_name)
    return os.path.join(ctx.paths.os_image_dir, f"{instance_name}.image")


def seed_path(ctx: NodeContext, instance_name: str) -> str:
    validation.check_hostname(instance_name)
    return ctx.paths.cloud_init_seed(instance_name)


@procedure(NORMAL)
def os_image_put_chunk(ctx: NodeContext, instance_name: str, offset: int, data: str) -> int:
    """Write base64 data (<= 8 MiB) at offset of the instance's staged OS image (0: afresh). ->
    bytes written

    Write base64 ``data`` at ``offset`` of the staging file (0 starts it afresh).
    """
    chunk = base64.b64decode(data.encode("ascii"), validate=True)
    if len(chunk) > MAX_CHUNK or offset < 0:
        raise errors.StorageError(f"Chunk too large or bad offset ({len(chunk)} at {offset})")
    path = _stage_path(ctx, instance_name)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    if offset == 0:
        _unlink(path)       # never truncate in place: it may be a link to a cached copy
    with open(path, "wb" if offset == 0 else "r+b") as fh:
        fh.seek(offset)
        fh.write(chunk)
    return len(chunk)


def _open_source(ctx: NodeContext, url: str) -> Any:
    if os.path.isabs(url):
        try:
            return open(url, "rb")
        except OSError as exc:
            raise errors.StorageError(f"Cannot read OS image {url} (not on the master, nor on"
                                      f" node {ctx.hostname}): {exc.strerror}") from None
    if not url.startswith(osimage.URL_SCHEMES):
        raise errors.StorageError(f"Cannot fetch OS image {url}: only http, https and ftp"
                                  " URLs or absolute paths are supported")
    return urllib.request.urlopen(url, timeout=FETCH_TIMEOUT)


@procedure(SLOW)
def os_image_fetch(ctx: NodeContext, instance_name: str, url: str, max_size: int) -> int:
    """Copy an http(s) OS image, or a file of this node (an absolute path), to the instance's
    staging file (at most max_size bytes; removed on failure). -> bytes fetched

    Copy ``url`` to the staging file, at most ``max_size`` bytes; bytes fetched.

    ``url`` is an http(s) URL, or an absolute path of a file of this node
    (Ganeti 3.0's meaning of a path, used when the master has no such
    file).  An unreachable URL, an HTTP error, a missing file or a longer
    image is an error; the partial file is removed then.
    """
    path = _stage_path(ctx, instance_name)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    _unlink(path)
    done = 0
    try:
        with _open_source(ctx, url) as resp, open(path, "wb") as out:
            while True:
                block = resp.read(1024 * 1024)
                if not block:
                    break
                done += len(block)
                if done > max_size:
                    raise errors.StorageError(f"OS image {url} is larger than the disk"
                                              f" ({max_size} bytes)")
                out.write(block)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        _unlink(path)
        raise errors.StorageError(f"Cannot fetch OS image {url}: {exc}") from exc
    except BaseException:
        _unlink(path)
        raise
    return done


@procedure(SLOW)
def os_image_inspect(ctx: NodeContext, instance_name: str) -> dict[str, Any]:
    """{format (raw, qcow2 or None), size, virtual_size, sha256, what} of the staged OS image.

    ``{format (None: neither raw nor qcow2), size, virtual_size, sha256, what}``.
    """
    path = _stage_path(ctx, instance_name)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            header = fh.read(osimage.HEADER_SIZE)
            digest.update(header)
            for block in iter(lambda: fh.read(1024 * 1024), b""):
                digest.update(block)
            size = fh.tell()
    except OSError as exc:
        raise errors.StorageError(f"Cannot read the staged OS image: {exc}") from exc
    return osimage.facts(header, size, digest.hexdigest())


@procedure(SLOW)
def os_image_write(ctx: NodeContext, instance_name: str, disk: dict, image_format: str) -> int:
    """qemu-img convert the staged OS image onto the disk, then remove it. -> the disk's bytes

    Convert the staged image onto ``disk`` (kept at its size); bytes of the disk.

    The staging file is removed whatever the outcome.
    """
    src = _stage_path(ctx, instance_name)
    try:
        if image_format not in osimage.FORMATS:
            raise errors.StorageError(f"Unknown image format {image_format!r}")
        dst = blockdev._file_path(ctx, disk)
        res = run_command(["qemu-img", "convert", "-n", "-f", image_format, "-O", "raw",
                           src, dst], timeout=WRITE_TIMEOUT)
        if res.failed:
            raise errors.StorageError(f"qemu-img convert failed: {res.fail_reason}:"
                                      f" {res.stderr.strip()[-400:]}")
        with open(dst, "rb") as fh:
            return fh.seek(0, os.SEEK_END)
    finally:
        _unlink(src)


@procedure(FAST)
def os_image_remove(ctx: NodeContext, instance_name: str) -> None:
    """Remove the instance's staged OS image, if any. -> None

    Remove the staging file of ``instance_name`` (nothing when there is none).
    """
    _unlink(_stage_path(ctx, instance_name))


def _cache_path(ctx: NodeContext, sha256: str) -> str:
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise errors.StorageError(f"Invalid image checksum {sha256!r}")
    return os.path.join(ctx.paths.os_image_cache_dir, sha256)


def _link_or_copy(src: str, dst: str) -> None:
    """Make ``dst`` hold ``src``'s bytes, atomically (a hard link, else a copy)."""
    tmp = f"{dst}.tmp{os.getpid()}"
    _unlink(tmp)
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        _unlink(tmp)
        raise


@procedure(NORMAL)
def os_image_cache_stage(ctx: NodeContext, instance_name: str, sha256: str) -> bool:
    """Stage the node's cached copy of a store image (by its sha256) as the instance's OS image.
    -> True, or False when the node has no such copy

    Stage the cached store image ``sha256`` for ``instance_name``; False when
    this node has no copy.  The master inspects the staged file as any other
    (so a damaged copy is refused, and then dropped by the master)."""
    cached = _cache_path(ctx, sha256)
    if not os.path.isfile(cached):
        return False
    path = _stage_path(ctx, instance_name)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    _unlink(path)
    _link_or_copy(cached, path)
    return True


@procedure(NORMAL)
def os_image_cache_keep(ctx: NodeContext, instance_name: str, sha256: str) -> None:
    """Keep the instance's staged OS image (already checked) in the node's cache under its
    sha256. -> None

    Keep the staged image of ``instance_name`` as the cached copy ``sha256``
    (the master has checked its digest; the staged file stays for the write)."""
    cached = _cache_path(ctx, sha256)
    os.makedirs(os.path.dirname(cached), mode=0o700, exist_ok=True)
    _link_or_copy(_stage_path(ctx, instance_name), cached)


@procedure(FAST)
def os_image_cache_remove(ctx: NodeContext, sha256: str) -> None:
    """Remove the node's cached copy of a store image, if any. -> None

    Drop the cached copy ``sha256`` (nothing when there is none).
    """
    _unlink(_cache_path(ctx, sha256))


@procedure(NORMAL)
def instance_seed_build(ctx: NodeContext, instance_name: str, instance_uuid: str, nics: list,
                        osparams: dict, osparams_private: dict) -> str:
    """(Re)build the instance's cloud-init NoCloud seed ISO from its NICs ([[mac, address,
    gateway], ...]) and OS parameters. -> its path

    (Re)build the instance's NoCloud seed ISO; its path.

    ``nics``: ``[[mac, address or None, gateway or None], ...]``;
    ``osparams_private[user_data]``, when set, is the whole user-data.
    """
    dest = seed_path(ctx, instance_name)
    seed_nics = [cloudinit.SeedNic(mac=str(n[0]), address=n[1], gateway=n[2]) for n in nics]
    private_doc = osparams_private.get(cloudinit.USER_DATA_PARAM)
    docs = {"meta-data": cloudinit.meta_data(instance_uuid, instance_name),
            "network-config": cloudinit.network_config(seed_nics, osparams),
            "user-data": cloudinit.user_data(osparams, str(private_doc) if private_doc else None)}
    write_seed_iso(docs, dest)
    _write_metadata_entry(ctx, instance_name, instance_uuid,
                          [str(n[1]) for n in nics if n[1]], docs)
    return dest


def write_seed_iso(docs: dict[str, str], dest: str) -> None:
    """Write the NoCloud seed ISO holding ``docs`` (file name -> text) to ``dest``
    (mode 0600, atomically; its directory made 0700 when missing).

    Raises :class:`errors.StorageError` when ``genisoimage`` fails.
    """
    os.makedirs(os.path.dirname(dest), mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(dest)) as tmp:
        files = []
        for name, text in docs.items():
            fpath = os.path.join(tmp, name)
            with open(os.open(fpath, os.O_WRONLY | os.O_CREAT, 0o600), "w",
                      encoding="utf-8") as fh:
                fh.write(text)
            files.append(fpath)
        out = os.path.join(tmp, "seed.iso")
        res = run_command(["genisoimage", "-quiet", "-output", out, "-volid",
                           cloudinit.VOLUME_ID, "-joliet", "-rock", *files], timeout=60)
        if res.failed:
            raise errors.StorageError(f"Cannot build the cloud-init seed: {res.fail_reason}:"
                                      f" {res.stderr.strip()[-400:]}")
        os.chmod(out, 0o600)
        os.replace(out, dest)


def _write_metadata_entry(ctx: NodeContext, instance_name: str, instance_uuid: str,
                          addresses: list[str], docs: dict[str, str]) -> None:
    """The instance's entry for ``ganeti-metad``: the seed's documents, by NIC address.

    Written atomically with mode 0600 (the user-data may be the private
    document); an instance without a static address gets none (the service
    could not tell its requests apart), and an old one is removed.
    """
    path = ctx.paths.metadata_entry(instance_name)
    if not addresses:
        _unlink(path)
        return
    text = metadata.entry_text(instance_name, instance_uuid, addresses, docs)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w",
                  encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def metadata_forget(ctx: NodeContext, instance_name: str) -> None:
    """Drop the instance's metadata entry: it no longer runs here (stopped, moved away)."""
    validation.check_hostname(instance_name)
    _unlink(ctx.paths.metadata_entry(instance_name))


def refresh_seed(ctx: NodeContext, instance: dict) -> str | None:
    """Rebuild the seed of an image-based instance from its RPC dict; its path.

    Run before the instance starts here or receives a migration, so the seed
    always matches the configuration and exists on whichever node runs the
    instance (the kvm hypervisor attaches it when it exists).  None for an
    instance without the OS parameter ``os-image``.
    """
    osparams = instance.get("osparams") or {}
    if not osparams.get(osimage.OS_IMAGE_PARAM):
        return None
    netinfo = instance.get("nics_netinfo") or []
    nics, networks = [], {}
    for idx, nic in enumerate(instance.get("nics") or []):
        info = netinfo[idx] if idx < len(netinfo) else None
        if info:
            networks[str(idx)] = {"network": info.get("NETWORK_SUBNET"),
                                  "gateway": info.get("NETWORK_GATEWAY")}
        nics.append({"mac": nic.get("mac", ""), "ip": nic.get("ip"),
                     "network": str(idx) if info else None})
    seed = [[n.mac, n.address, n.gateway] for n in cloudinit.seed_nics(nics, networks)]
    return instance_seed_build(ctx, str(instance["name"]), str(instance.get("uuid", "")), seed,
                               dict(osparams), dict(instance.get("osparams_private") or {}))


@procedure(FAST)
def instance_seed_remove(ctx: NodeContext, instance_name: str) -> None:
    """Remove the instance's cloud-init seed ISO and metadata entry, if any. -> None"""
    _unlink(seed_path(ctx, instance_name))
    _unlink(ctx.paths.metadata_entry(instance_name))


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

