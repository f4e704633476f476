"""The instance metadata service's data and answers (pure; doc/images.md, "The metadata service").

A node keeps one *entry* per instance it serves: the instance's name, its
NIC addresses and the documents of its NoCloud seed (``meta-data``,
``user-data``, ``network-config``), the same texts as the seed ISO.  The
node daemon writes an entry as a JSON file (:func:`entry_text`) whenever
it builds the seed; ``ganeti-metad`` reads the files (:func:`parse_entry`),
indexes them by address (:func:`build_table`) and answers each request
from the table and the request's source address alone (:func:`answer`):
bytes in, bytes out, no I/O here.

The layout is cloud-init's NoCloud over the network (``ds=nocloud-net;
s=http://169.254.169.254/``, or ``seedfrom`` in its configuration): the data
source fetches ``<seedfrom>meta-data``, ``user-data``, ``vendor-data`` and
``network-config``.  An address that is no NIC of an instance of the
node, or that two instances claim, gets 403 whatever it asks.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ganeti import errors

__all__ = ["DOCUMENTS", "Entry", "Answer", "entry_text", "parse_entry", "build_table",
           "normalize_address", "answer"]

#: the documents of an entry (the seed's files), in the order of the index
DOCUMENTS = ("meta-data", "user-data", "vendor-data", "network-config")
_TEXT = "text/plain; charset=utf-8"
_ENTRY_VERSION = 1


@dataclass(frozen=True)
class Entry:
    """What the service knows of one instance."""

    name: str
    uuid: str
    addresses: tuple[str, ...]
    documents: Mapping[str, str]


@dataclass(frozen=True)
class Answer:
    """A response: status, content type and body (an empty body for HEAD is the server's job)."""

    status: int
    content_type: str
    body: bytes


def normalize_address(address: str) -> str | None:
    """``address`` in canonical form (an IPv4-mapped IPv6 address as IPv4); None if invalid."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def entry_text(name: str, uuid: str, addresses: Sequence[str],
               documents: Mapping[str, str]) -> str:
    """The JSON text of an entry (the file the node daemon writes, mode 0600).

    ``addresses`` may carry a prefix length (``192.0.2.10/24``, as in
    ``network-config``); only the address is kept.  ``vendor-data`` is
    empty unless given.
    """
    addrs = []
    for addr in addresses:
        norm = normalize_address(addr.split("/", 1)[0])
        if norm is None:
            raise errors.ParameterError(f"Invalid NIC address {addr!r} for the metadata service")
        addrs.append(norm)
    docs = {doc: str(documents.get(doc, "")) for doc in DOCUMENTS}
    return json.dumps({"version": _ENTRY_VERSION, "name": name, "uuid": uuid,
                       "addresses": addrs, "documents": docs}, sort_keys=True) + "\n"


def parse_entry(text: str) -> Entry:
    """An entry from its JSON text; :class:`errors.ParameterError` when it is not one."""
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != _ENTRY_VERSION:
            raise ValueError("not a metadata entry")
        docs = data["documents"]
        addresses = data["addresses"]
        if not isinstance(docs, dict) or not isinstance(addresses, list):
            raise ValueError("bad documents or addresses")
        return Entry(name=str(data["name"]), uuid=str(data["uuid"]),
                     addresses=tuple(str(a) for a in addresses),
                     documents={doc: str(docs.get(doc, "")) for doc in DOCUMENTS})
    except (ValueError, KeyError, TypeError) as exc:
        raise errors.ParameterError(f"Invalid metadata entry: {exc}") from None


def build_table(entries: Iterable[Entry]) -> dict[str, Entry | None]:
    """``{address: entry}``; an address two entries claim maps to None (refused)."""
    table: dict[str, Entry | None] = {}
    for entry in entries:
        for addr in entry.addresses:
            norm = normalize_address(addr)
            if norm is None:
                continue
            if norm in table and table[norm] is not entry:
                table[norm] = None
            else:
                table[norm] = entry
    return table


def _doc_name(target: str) -> str | None:
    """The document a request target names (``""`` for the index), or None."""
    path = target.split("?", 1)[0].split("#", 1)[0]
    if not path.startswith("/"):
        return None
    path = path.lstrip("/")
    if path in ("", *DOCUMENTS):
        return path
    return None


def answer(table: Mapping[str, Entry | None], source: str, method: str,
           target: str) -> Answer:
    """The answer to ``method target`` asked from ``source`` (the peer's address).

    403 for an unknown or ambiguous source (before looking at the target,
    so an outsider learns nothing), 405 for a method other than GET/HEAD,
    404 for a path that is no document; ``/`` lists the documents.
    """
    norm = normalize_address(source)
    entry = table.get(norm) if norm is not None else None
    if entry is None:
        return Answer(403, _TEXT, b"Forbidden: not an instance of this node\n")
    if method not in ("GET", "HEAD"):
        return Answer(405, _TEXT, b"Method not allowed\n")
    doc = _doc_name(target)
    if doc is None:
        return Answer(404, _TEXT, b"Not found\n")
    if doc == "":
        return Answer(200, _TEXT, "".join(f"{d}\n" for d in DOCUMENTS).encode())
    return Answer(200, _TEXT, entry.documents.get(doc, "").encode("utf-8"))
