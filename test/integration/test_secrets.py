"""Secrets never leak (issue 19, item 11; doc/protocols/opcodes.md, "Private parameters").

A random canary goes into every secret-bearing field (private OS
parameters on instance add, modify and reinstall; the cluster domain
secret; a RAPI user's password, used right and wrong) of a 3-node virtual
cluster whose master logs at debug level.  An
instance lifecycle runs through raw LUXI, the jobs are listed and
archived, and then every LUXI answer received and every file under the
cluster directory (node roots: job files on the master and the
candidates, the archive, logs, hook environments) is searched: no
canary may be found, except in the files meant to hold them (each node's
``config.data`` and ``cluster-domain-secret``, the RAPI users file) and in what the OS scripts
themselves wrote (outside the cluster directory, checked to hold them).
"""

from __future__ import annotations

import base64
import http.client
import os
import secrets
import ssl
import subprocess
import time
from typing import Any

import pytest
from instance_helpers import install_os
from vcluster_harness import VirtualCluster

from ganeti import luxi, serializer

pytestmark = pytest.mark.timeout(300)

N1 = "node1.vcluster"
INST = "secret1.example.com"
ROUNDS = 120          # WaitForJobChange rounds of at most 1 s per job
ALLOWED = ("config.data", "cluster-domain-secret", "users")   # users: the RAPI users file


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcs"), nodes=3, use_ssh=False,
                        masterd_args=["-d"]) as cluster:
        yield cluster


class RecordingClient:
    """A LUXI client that keeps the JSON text of every answer."""

    def __init__(self, path: str) -> None:
        self._cl = luxi.Client(path)
        self.answers: list[str] = []

    def call(self, method: str, args: list[Any]) -> Any:
        result = self._cl.call(method, args)
        self.answers.append(serializer.dumps(result))
        return result

    def run(self, op: dict[str, Any]) -> Any:
        job_id = self.call("SubmitJob", [[op]])
        prev, serial = None, -1
        for _ in range(ROUNDS):
            res = self.call("WaitForJobChange", [job_id, ["status"], prev, serial, 1])
            if res != "nochange":
                prev = res[0]
                serial = max([serial] + [entry[0] for entry in res[1]])
                if prev[0] in ("success", "error", "canceled"):
                    break
        status, result = self.call("QueryJobs", [[job_id], ["status", "opresult"]])[0]
        assert status == "success", (op["OP_ID"], result)
        return result[0]


def _os_script(out_dir: str) -> str:
    return f"#!/bin/sh\nenv > '{out_dir}'/\"$$.env\"\nexit 0\n"


def _files_with(root: str, needles: list[bytes]) -> list[str]:
    hits = []
    for base, _, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                data = fh.read()
            hits += [f"{path}: {n.decode()}" for n in needles if n in data]
    return hits


def _rapi_status(vc, method: str, path: str, user: str, password: str) -> tuple[int, str]:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conn = http.client.HTTPSConnection(vc.cluster.master_node.ip, vc.cluster.rapi_port,
                                       context=ctx, timeout=30)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    try:
        conn.request(method, path, body=b"" if method != "GET" else None,
                     headers={"Authorization": f"Basic {token}",
                              "Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def _use_rapi_password(vc, password: str) -> str:
    """A write user whose password is ``password``, used right and wrong; the answers."""
    path = vc.paths(N1).rapi_users_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        fh.write(f"operator {password} write\n")
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)
    answers = []
    for _ in range(200):    # the daemon reloads the file on its own
        status, text = _rapi_status(vc, "PUT", "/2/tags?tag=x&dry-run=1", "operator", password)
        answers.append(text)
        if status == 200:
            break
        time.sleep(0.05)
    assert status == 200, answers[-1]
    status, text = _rapi_status(vc, "PUT", "/2/tags?tag=x&dry-run=1", "operator", password + "x")
    assert status == 401
    return "".join(answers) + text


def test_no_secret_leaks_through_a_lifecycle(vc, tmp_path):
    canaries = {k: f"canary-{k}-{secrets.token_hex(8)}" for k in ("add", "modify", "reinstall",
                                                                  "cds")}
    needles = [c.encode() for c in canaries.values()]
    os_out = tmp_path / "os-out"
    os_out.mkdir()
    install_os(vc, "secretos", {"create": _os_script(str(os_out))})
    for node in vc.names:
        with open(os.path.join(vc.paths(node).os_search_path[0], "secretos",
                               "parameters.list"), "w") as fh:
            fh.write("secret the secret\nvisible a public one\n")
        for hpath in ("instance-add", "instance-modify", "instance-reinstall"):
            for phase in ("pre", "post"):
                hook_dir = vc.paths(node).hooks_dir(hpath, phase)
                os.makedirs(hook_dir, exist_ok=True)
                script = os.path.join(hook_dir, "50-env")
                with open(script, "w") as fh:   # the dump stays under the node root: searched
                    fh.write(f"#!/bin/sh\nenv > '{hook_dir}/env.$$'\n")
                os.chmod(script, 0o755)

    cl = RecordingClient(vc.paths(N1).master_socket)
    cl.run({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": INST, "disk_template": "file",
            "disks": [{"size": 16}], "nics": [{}], "os_type": "secretos", "pnode": N1,
            "osparams": {"visible": "public-value"},
            "osparams_private": {"secret": canaries["add"]},
            "name_check": False, "ip_check": False, "start": True})
    changes = cl.run({"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": INST,
                      "osparams_private": {"secret": canaries["modify"]}})
    assert ["os_private/secret", "<redacted>"] in changes
    cl.run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": INST})
    cl.run({"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": INST,
            "osparams_private": {"secret": canaries["reinstall"]}})
    cl.run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": INST})
    cl.run({"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "new_cluster_certificate": False,
            "cluster_domain_secret": canaries["cds"]})
    ids = cl.call("QueryJobs", [None, ["id"]])
    fields = ["id", "status", "ops", "opresult", "oplog", "summary"]
    cl.call("QueryJobs", [[r[0] for r in ids], fields])
    cl.call("Query", ["job", fields, None])
    cli = [subprocess.run(argv, env=vc.env(), capture_output=True, text=True, timeout=60)
           for argv in (["gnt-job", "list"], ["gnt-job", "info", *[str(r[0]) for r in ids]],
                        ["gnt-instance", "info", INST])]
    cl.call("AutoArchiveJobs", [-1, 30])
    cl.call("QueryJobs", [[r[0] for r in ids], fields])

    canaries["rapi"] = f"canary-rapi-{secrets.token_hex(8)}"
    needles.append(canaries["rapi"].encode())
    rapi_said = _use_rapi_password(vc, canaries["rapi"])

    # the secrets reached where they belong
    envs = "".join(p.read_text() for p in os_out.iterdir())
    assert f"OSP_SECRET={canaries['add']}" in envs
    assert f"OSP_SECRET={canaries['reinstall']}" in envs and "OSP_VISIBLE=public-value" in envs
    with open(vc.paths(N1).config_file, "rb") as fh:
        assert canaries["reinstall"].encode() in fh.read()
    with open(vc.paths(N1).cluster_domain_secret, "rb") as fh:
        assert canaries["cds"].encode() in fh.read()
    hooks_ran = [p for n in vc.names for p in _files_with(vc.paths(n).hooks_base_dir,
                                                          [b"GANETI_INSTANCE_NAME"])]
    assert hooks_ran, "the env hooks did not run"
    # ... and nowhere else
    for cmd in cli:
        assert cmd.returncode == 0, cmd.stdout + cmd.stderr
    said = "".join(cl.answers) + "".join(c.stdout + c.stderr for c in cli) + rapi_said
    assert [c for c in canaries.values() if c in said] == []
    leaks = [h for h in _files_with(vc.directory, needles)
             if os.path.basename(h.split(":")[0]) not in ALLOWED]
    assert leaks == []
