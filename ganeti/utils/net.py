"""This node's identity (name) on the cluster."""

from __future__ import annotations

import os
import socket

from ganeti import constants

__all__ = ["hostname"]


def hostname() -> str:
    """This node's name: ``$GANETI_HOSTNAME`` when set, else the FQDN."""
    name = os.environ.get(constants.ENV_HOSTNAME)
    if name:
        return name.lower()
    return socket.getfqdn().lower()
