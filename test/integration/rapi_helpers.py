"""RAPI calls of the integration tests: a user who may write, and a JSON request as that user.

Shared by the modules that drive a virtual cluster's RAPI with plain
``http.client`` (doc/rapi.md for the resources).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import time
from typing import Any

#: the user :func:`add_writer` adds, and its password
WRITER = ("writer", "wpass")


def add_writer(vc: Any, node: str = "node1.vcluster") -> None:
    """Give ``vc``'s RAPI (on ``node``) the user :data:`WRITER` with write access."""
    path = vc.paths(node).rapi_users_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(f"{WRITER[0]} {WRITER[1]} write\n")
    os.chmod(path, 0o600)


def call(vc: Any, method: str, path: str, body: Any = None) -> Any:
    """The JSON answer of ``method path`` (with ``body`` as JSON) as :data:`WRITER`;
    fails the test unless the answer is 200."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(vc.cluster.master_node.ip, vc.cluster.rapi_port,
                                       context=ctx, timeout=60)
    auth = base64.b64encode(f"{WRITER[0]}:{WRITER[1]}".encode()).decode()
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"Authorization": f"Basic {auth}",
                              "Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
    finally:
        conn.close()
    assert resp.status == 200, (resp.status, data)
    return json.loads(data)


def wait_job(vc: Any, job_id: int, tries: int = 600) -> dict[str, Any]:
    """The RAPI view of job ``job_id`` once it is finished (polled every 0.1 s)."""
    for _ in range(tries):
        job = call(vc, "GET", f"/2/jobs/{job_id}")
        if job["status"] in ("success", "error", "canceled"):
            return dict(job)
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} did not finish")
