"""A refused private or secret OS parameter does not leak (issue 25, point 2).

The OS ``refuseos`` prints the value it refuses, as the shipped OS does:
its ``verify`` refuses a ``token`` starting with ``bad`` and its ``create``
refuses a ``key`` starting with ``fail``, each echoing the value to its
log, whose last lines become the error.  On a 3-node virtual cluster (the
master logs at debug level; job files on the master and two candidates)
operations are run with ``gnt-instance add|modify|reinstall
--os-parameters-private/--os-parameters-secret`` and a RAPI reinstall; then
every job file on every node, every daemon log, ``GET /2/jobs/N`` without
credentials, LUXI ``QueryJobs`` and ``gnt-job info`` are searched: no
refused value may be found, and the failed jobs carry the redaction
marker instead.  A secret parameter reaches the OS script (it writes the
value's SHA-256) yet is never written to ``config.data`` or a job file.
(doc/protocols/opcodes.md, "Private parameters"; doc/protocols/os-api.md.)
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import re
import secrets
import ssl
import time
from typing import Any

import pytest
from instance_helpers import install_os
from vcluster_harness import VirtualCluster

from ganeti import constants, luxi
from ganeti.private import REDACTED

pytestmark = pytest.mark.timeout(600)

N1 = "node1.vcluster"
INST = "refused1.example.com"
ROUNDS = 300          # WaitForJobChange rounds of at most 1 s per job
RAPI_USER = "operator"

VERIFY = """#!/bin/sh
case "$OSP_TOKEN" in
  bad*) echo "invalid value '$OSP_TOKEN' for parameter token" >&2; exit 1 ;;
esac
exit 0
"""


def _create(out_dir: str) -> str:
    """The create script: the SHA-256 of the key it got, then refuse 'fail*' keys."""
    return f"""#!/bin/sh
printf '%s' "$OSP_KEY" | sha256sum | cut -d' ' -f1 >> '{out_dir}/key-hashes'
case "$OSP_KEY" in
  fail*) echo "cannot use key '$OSP_KEY'" >&2; exit 1 ;;
esac
exit 0
"""


@pytest.fixture(scope="module")
def vc(tmp_path_factory):
    with VirtualCluster(tmp_path_factory.mktemp("vcr"), nodes=3, use_ssh=False,
                        masterd_args=["-d"]) as cluster:
        yield cluster


def _tls() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _rapi(vc, method: str, path: str, body: Any = None,
          password: str | None = None) -> tuple[int, str]:
    conn = http.client.HTTPSConnection(vc.cluster.master_node.ip, vc.cluster.rapi_port,
                                       context=_tls(), timeout=60)
    headers = {"Content-Type": "application/json"}
    if password is not None:
        token = base64.b64encode(f"{RAPI_USER}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body).encode(),
                     headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def _wait(cl: luxi.Client, job_id: int) -> str:
    prev, serial = None, -1
    for _ in range(ROUNDS):
        res = cl.call("WaitForJobChange", [job_id, ["status"], prev, serial, 1])
        if res != "nochange":
            prev = res[0]
            serial = max([serial] + [entry[0] for entry in res[1]])
            if prev[0] in ("success", "error", "canceled"):
                return str(prev[0])
    raise AssertionError(f"job {job_id} did not finish")


def _submit_cli(vc, cl: luxi.Client, *argv: str) -> tuple[int, str]:
    """Run ``gnt-instance ... --submit``; the job id and its final status."""
    res = vc.run("gnt-instance", *argv, "--submit")
    assert res.returncode == 0, res.stdout + res.stderr
    match = re.search(r"JobID: (\d+)", res.stderr)
    assert match, res.stderr
    job_id = int(match.group(1))
    return job_id, _wait(cl, job_id)


def _files_with(root: str, needle: bytes) -> list[str]:
    hits = []
    for base, _, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as fh:
                if needle in fh.read():
                    hits.append(path)
    return hits


def _write_rapi_user(vc, password: str) -> None:
    path = vc.paths(N1).rapi_users_file
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as fh:
        fh.write(f"{RAPI_USER} {password} write\n")
    os.chmod(path + ".tmp", 0o600)
    os.replace(path + ".tmp", path)
    for _ in range(200):    # the daemon reloads the file on its own
        status, _ = _rapi(vc, "PUT", "/2/tags?tag=x&dry-run=1", {}, password)
        if status == 200:
            return
        time.sleep(0.05)
    raise AssertionError("the RAPI user was not loaded")


def test_refused_private_and_secret_values_never_leak(vc, tmp_path):
    canary = {k: f"{prefix}{k}-{secrets.token_hex(8)}" for k, prefix in
              (("add", "bad-"), ("keep", "good-"), ("secret", "sec-"), ("reinstall", "fail-"),
               ("modify", "bad-"), ("rapi", "fail-"))}
    out = tmp_path / "os-out"
    out.mkdir()
    install_os(vc, "refuseos", {"verify": VERIFY, "create": _create(str(out))})
    for node in vc.names:
        with open(os.path.join(vc.paths(node).os_search_path[0], "refuseos",
                               "parameters.list"), "w") as fh:
            fh.write("token a private token\nkey a secret key\n")
    cl = luxi.Client(vc.paths(N1).master_socket)
    common = ["-t", "file", "--disk", "0:size=16", "-o", "refuseos", "-n", N1,
              "--no-name-check", "--no-ip-check", "--no-start"]

    # 1. add: the OS's verify refuses the private token and prints it
    refused_add, status = _submit_cli(vc, cl, "add", *common,
                                      "--os-parameters-private", f"token={canary['add']}",
                                      INST)
    assert status == "error"
    # 2. add with a private token it takes and a secret key: the script got the key
    good_add, status = _submit_cli(vc, cl, "add", *common,
                                   "--os-parameters-private", f"token={canary['keep']}",
                                   "--os-parameters-secret", f"key={canary['secret']}", INST)
    assert status == "success"
    # 3. modify: a private token verify refuses
    refused_modify, status = _submit_cli(vc, cl, "modify", "--os-parameters-private",
                                         f"token={canary['modify']}", INST)
    assert status == "error"
    # 4. reinstall: create refuses the secret key and prints it
    refused_reinstall, status = _submit_cli(vc, cl, "reinstall", "-f",
                                            "--os-parameters-secret",
                                            f"key={canary['reinstall']}", INST)
    assert status == "error"
    # 5. the same through RAPI (authenticated write), refused by create
    password = f"pw-{secrets.token_hex(8)}"
    _write_rapi_user(vc, password)
    code, text = _rapi(vc, "POST", f"/2/instances/{INST}/reinstall",
                       {"start": False, "osparams_secret": {"key": canary["rapi"]}}, password)
    assert code == 200, text
    refused_rapi = int(json.loads(text))
    assert _wait(cl, refused_rapi) == "error"

    refused = [refused_add, refused_modify, refused_reinstall, refused_rapi]
    hidden = [canary[k] for k in ("add", "modify", "reinstall", "rapi", "secret")]
    hashes = (out / "key-hashes").read_text().split()
    for key in ("secret", "reinstall", "rapi"):   # the OS scripts got the secret values
        assert hashlib.sha256(canary[key].encode()).hexdigest() in hashes, key

    # every way to read a job: LUXI, gnt-job info, RAPI without credentials
    fields = ["id", "status", "ops", "opresult", "oplog", "summary"]
    said = [json.dumps(cl.call("QueryJobs", [refused + [good_add], fields]))]
    for job_id in refused:
        status_, opresult = cl.call("QueryJobs", [[job_id], ["status", "opresult"]])[0]
        assert status_ == "error" and REDACTED in json.dumps(opresult), (job_id, opresult)
        info = vc.run("gnt-job", "info", str(job_id))
        assert info.returncode == 0 and REDACTED in info.stdout, info.stdout + info.stderr
        code, text = _rapi(vc, "GET", f"/2/jobs/{job_id}")
        assert code == 200 and REDACTED in text, text
        said += [info.stdout, info.stderr, text]
    leaked = [c for c in hidden if any(c in s for s in said)]
    assert leaked == []

    # on disk: job files on every node, every daemon log, OS logs; the kept
    # private token only in config.data, the secret nowhere
    for value in hidden:
        assert _files_with(vc.directory, value.encode()) == [], value
    kept = _files_with(vc.directory, canary["keep"].encode())
    assert kept and all(os.path.basename(p) == "config.data" for p in kept), kept
    for job_id in refused:        # the job file on the master and the candidates
        copies = [os.path.join(vc.paths(n).queue_dir, f"job-{job_id}") for n in vc.names]
        copies = [p for p in copies if os.path.exists(p)]
        assert len(copies) >= 2, copies
        for path in copies:
            with open(path) as fh:
                assert REDACTED in fh.read(), path
    # both daemons logged the refusal, scrubbed
    master_log = open(vc.paths(N1).daemon_log_file(constants.MASTERD)).read()
    noded_log = open(vc.paths(N1).daemon_log_file(constants.NODED)).read()
    assert f"invalid value '{REDACTED}'" in master_log
    assert f"invalid value '{REDACTED}'" in noded_log
    assert f"cannot use key '{REDACTED}'" in noded_log
