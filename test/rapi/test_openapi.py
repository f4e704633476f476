"""The OpenAPI document generated from the RAPI resource table."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from ganeti import serializer
from ganeti.rapi import openapi, roles
from ganeti.rapi import resources as res

_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
_PARAM_IN = {"query", "header", "path", "cookie"}


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def structural_problems(doc: dict[str, Any]) -> list[str]:
    """What makes ``doc`` not a structurally valid OpenAPI 3.0 document (a small check)."""
    problems: list[str] = []
    if not re.fullmatch(r"3\.0\.\d+", str(doc.get("openapi", ""))):
        problems.append("openapi: not 3.0.x")
    info = doc.get("info")
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str)
                                             for k in ("title", "version")):
        problems.append("info: needs title and version strings")
    schemes = doc.get("components", {}).get("securitySchemes", {})
    for ref in _refs(doc):
        node: Any = doc
        for part in ref.removeprefix("#/").split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        if not ref.startswith("#/") or node is None:
            problems.append(f"unresolved $ref {ref}")
    op_ids: list[str] = []
    paths = doc.get("paths")
    if not isinstance(paths, dict) or not paths:
        return problems + ["paths: missing or empty"]
    for path, item in paths.items():
        if not path.startswith("/"):
            problems.append(f"{path}: does not start with /")
        templated = set(re.findall(r"\{(\w+)\}", path))
        for method, op in item.items():
            where = f"{method} {path}"
            if method not in _METHODS:
                problems.append(f"{where}: not an HTTP method")
                continue
            op_ids.append(op.get("operationId", ""))
            responses = op.get("responses")
            if not isinstance(responses, dict) or not responses:
                problems.append(f"{where}: no responses")
            else:
                for code, resp in responses.items():
                    if not (code == "default" or re.fullmatch(r"[1-5]\d\d", code)):
                        problems.append(f"{where}: bad response code {code}")
                    if not isinstance(resp.get("description"), str):
                        problems.append(f"{where} {code}: no description")
            declared = set()
            for param in op.get("parameters", []):
                if not param.get("name") or param.get("in") not in _PARAM_IN:
                    problems.append(f"{where}: parameter needs name and in: {param}")
                if "schema" not in param and "content" not in param:
                    problems.append(f"{where}: parameter {param.get('name')} has no schema")
                if param.get("in") == "path":
                    declared.add(param["name"])
                    if param.get("required") is not True:
                        problems.append(f"{where}: path parameter {param['name']} optional")
            if declared != templated:
                problems.append(f"{where}: path parameters {sorted(declared)} !="
                                f" {sorted(templated)}")
            body = op.get("requestBody")
            if body is not None and not isinstance(body.get("content"), dict):
                problems.append(f"{where}: requestBody without content")
            for requirement in op.get("security", []):
                for name in requirement:
                    if name not in schemes:
                        problems.append(f"{where}: unknown security scheme {name}")
    if len(op_ids) != len(set(op_ids)) or "" in op_ids:
        problems.append("operationId: missing or not unique")
    return problems


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return openapi.document(res.ROUTES)


def test_document_is_structurally_valid(doc):
    assert structural_problems(doc) == []


@pytest.mark.parametrize("mutate", [
    lambda d: d.update(openapi="2.0"),
    lambda d: d["info"].pop("title"),
    lambda d: d["paths"]["/2/jobs/{job_id}"]["get"].pop("parameters"),
    lambda d: d["paths"]["/2/info"]["get"]["responses"]["200"].pop("description"),
    lambda d: d["paths"]["/2/info"]["get"].update(responses={}),
    lambda d: d["components"]["schemas"].pop("JobId"),
    lambda d: d["paths"]["/2/tags"]["put"].update(security=[{"digest": []}]),
    lambda d: d["paths"]["/2/tags"]["put"].update(operationId="get_2_info"),
], ids=["version", "title", "path-param", "description", "no-responses", "ref",
        "security-scheme", "operation-id"])
def test_structural_check_sees_broken_documents(doc, mutate):
    broken = copy.deepcopy(doc)
    mutate(broken)
    assert structural_problems(broken)


def test_every_row_appears_and_nothing_else(doc):
    expected = {(r.path, r.method.lower()) for r in res.ROUTES}
    got = {(path, method) for path, item in doc["paths"].items() for method in item}
    assert got == expected


def _undocumented(routes: list[res.Route]) -> list[str]:
    """The rows of ``routes`` without their OpenAPI text (``doc=Doc(...)``)."""
    return [f"{r.method} {r.path}" for r in routes if r.doc is None or not r.doc.summary]


def test_every_row_carries_its_doc():
    assert _undocumented(res.ROUTES) == [], "rows without doc=openapi.Doc(...)"


def test_a_row_without_its_doc_is_found():
    bare = res.Route("/2/new-thing", "POST", build=lambda c: [], opcode="OP_TEST_DELAY")
    assert _undocumented([*res.ROUTES, bare]) == ["POST /2/new-thing"]


def test_each_operation_is_its_rows_doc(doc):
    for route in res.ROUTES:
        assert route.doc is not None
        op = doc["paths"][route.path][route.method.lower()]
        assert op["summary"] == route.doc.summary
        names = [p["name"] for p in op.get("parameters", []) if p["in"] == "query"]
        assert names[:len(route.doc.params)] == [p.name for p in route.doc.params]


@pytest.mark.parametrize("route", res.ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_operation_carries_the_row(doc, route):
    op = doc["paths"][route.path][route.method.lower()]
    if route.needs_auth:
        assert op["security"] == [{"basicAuth": []}, {"bearerAuth": []}]
        assert "403" in op["responses"]
        assert op["x-ganeti-access"] == ("write" if route.needs_write else "auth")
    else:
        assert {} in op["security"] and op["x-ganeti-access"] == "read"
    assert op["x-ganeti-role"] == roles.row_role(route).label
    assert op.get("x-ganeti-opcode") == route.opcode
    names = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
    (result,) = [c["schema"] for c in op["responses"]["200"]["content"].values()]
    if route.build is not None:
        assert {"dry-run", "reason"} <= names
        assert result == {"$ref": "#/components/schemas/JobId"}
    else:
        assert "dry-run" not in names


def test_query_parameters_and_bodies(doc):
    def qnames(path: str, method: str) -> set[str]:
        return {p["name"] for p in doc["paths"][path][method].get("parameters", [])
                if p["in"] == "query"}
    assert "bulk" in qnames("/2/instances", "get")
    assert {"type", "ignore_secondaries"} <= qnames("/2/instances/{instance}/reboot", "post")
    assert "tag" in qnames("/2/tags", "put")
    create = doc["paths"]["/2/instances"]["post"]["requestBody"]["content"]
    assert create["application/json"]["schema"]["required"] == ["__version__"]
    role = doc["paths"]["/2/nodes/{node}/role"]["put"]["requestBody"]["content"]
    assert role["application/json"]["schema"]["type"] == "string"
    events = doc["paths"]["/2/events"]["get"]["responses"]["200"]["content"]
    assert list(events) == ["text/event-stream"]
    (job_id,) = doc["paths"]["/2/jobs/{job_id}"]["get"]["parameters"]
    assert job_id["schema"]["type"] == "integer"


def test_served_by_the_table():
    route, args = res.match("GET", "/2/openapi.json")
    assert not route.needs_write
    ctx = res.Ctx(method="GET", args=args, query={}, body=None, client=None,  # type: ignore[arg-type]
                  path="/2/openapi.json")
    served = res.dispatch(route, ctx)
    assert serializer.loads(serializer.dumps(served)) == openapi.document(res.ROUTES)


def test_a_row_without_docs_still_appears():
    extra = res.Route("/2/new-thing", "POST", build=lambda c: [], opcode="OP_TEST_DELAY")
    doc = openapi.document([*res.ROUTES, extra])
    op = doc["paths"]["/2/new-thing"]["post"]
    assert op["summary"] == "OP_TEST_DELAY" and op["security"] == [{"basicAuth": []},
                                                                      {"bearerAuth": []}]
    assert op["x-ganeti-role"] == "admin"     # a new row's opcode is an admin's by default
    assert structural_problems(doc) == []


def test_object_bodies_list_exactly_the_keys_the_row_accepts(doc):
    for route in res.ROUTES:
        body = doc["paths"][route.path][route.method.lower()].get("requestBody")
        if body is None or route.body_keys is None:
            continue
        schema = body["content"]["application/json"]["schema"]
        assert schema["additionalProperties"] is False
        assert set(schema["properties"]) == route.body_keys, (route.method, route.path)
        assert "OP_ID" not in schema["properties"]
