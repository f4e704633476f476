"""RAPI rows of API tokens: list, create, show and revoke (pure; the table is the server's).

Every row needs credentials; a user sees and revokes its own tokens, an
admin everyone's; a request made with a token sees and revokes that token
only (a leaked token cannot revoke its creator's others).  A token is made for its creator, with the creator's
role or a smaller one, and cannot make tokens itself (doc/rapi.md, "API
tokens").

A change is answered once the tokens file is on every node: the row runs
the cluster's file redistribution job (``OP_CLUSTER_REDIST_CONF``, as
``gnt-cluster redist-conf``), so a master failover cannot bring a revoked
token back.  When that job fails the answer is a 503 saying the change is
saved on the master only.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ganeti import errors
from ganeti.opcodes import wire
from ganeti.rapi.auth import VIA_TOKEN, Principal
from ganeti.rapi.openapi import OBJ, STR, Doc
from ganeti.rapi.opinput import Body
from ganeti.rapi.resources.base import Ctx, Route, bad, run_job
from ganeti.rapi.roles import Role, parse_role
from ganeti.rapi.tokens import MAX_LIFETIME, Token, TokenService

__all__ = ["ROUTES", "MAX_COMMENT"]

#: the longest comment a token may carry
MAX_COMMENT = 200


def _who(ctx: Ctx) -> tuple[Principal, TokenService]:
    if ctx.principal is None or ctx.tokens is None:
        raise errors.HttpError("Authentication required", 401)
    return ctx.principal, ctx.tokens


def _visible(principal: Principal, token: Token | None) -> bool:
    """Whether ``principal`` may see and revoke ``token``: a request with a token,
    that token only; another, its user's tokens (an admin's: all)."""
    if token is None:
        return False
    if principal.via == VIA_TOKEN:
        return token.id == principal.token_id
    return principal.role >= Role.ADMIN or token.user == principal.user


def _list(ctx: Ctx) -> list[dict[str, Any]]:
    principal, service = _who(ctx)
    now = service.now()
    return [t.public(now) for t in service.list() if _visible(principal, t)]


def _number(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad(f"'{key}' must be a number")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise bad(f"'{key}' must be a finite number")
    return number


def _distribute(ctx: Ctx, what: str, advice: str) -> None:
    """Copy the tokens file to every node (the redistribution job, waited for).

    Raises :class:`errors.HttpError` 503 when the job fails or cannot run.
    """
    try:
        run_job(dataclasses.replace(ctx, query={}), [wire.cluster_redist_conf()])
    except (errors.GanetiError, OSError) as exc:
        raise errors.HttpError(
            f"{what} is saved on the master but not yet on every node: the file"
            f" redistribution failed ({exc}); {advice}", 503) from exc


def _create(ctx: Ctx) -> dict[str, Any]:
    principal, service = _who(ctx)
    if principal.via == VIA_TOKEN:
        raise errors.HttpError("Permission denied: a token cannot make tokens", 403)
    body = ctx.body_dict()
    role = principal.role
    if body.get("role") is not None:
        asked = parse_role(str(body["role"]))
        if asked is None:
            raise bad(f"Unknown role {str(body['role'])[:40]!r} (readonly, operator, admin)")
        if asked > principal.role:
            raise errors.HttpError(f"Permission denied: user '{principal.user}' has role"
                                   f" {principal.role.label}, cannot make a token with role"
                                   f" {asked.label}", 403)
        role = asked
    expires = _number(body, "expires")
    expires_in = _number(body, "expires_in")
    if expires is not None and expires_in is not None:
        raise bad("Give 'expires' or 'expires_in', not both")
    if expires_in is not None:
        if expires_in <= 0 or expires_in > MAX_LIFETIME:
            raise bad(f"'expires_in' must be positive and at most {int(MAX_LIFETIME)}")
        expires = service.now() + expires_in
    comment = body.get("comment") or ""
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT:
        raise bad(f"'comment' must be a string of at most {MAX_COMMENT} characters")
    token, text = service.create(principal.user, role, expires=expires, comment=comment)
    _distribute(ctx, f"New token {token.id}", "its text is not shown: revoke it, and make"
                " another once 'gnt-cluster redist-conf' succeeds")
    return {**token.public(service.now()), "token": text}


def _one(ctx: Ctx) -> Token:
    principal, service = _who(ctx)
    token = service.get(ctx.args["token_id"])
    if token is None or not _visible(principal, token):
        raise errors.HttpError("Token not found", 404)
    return token


def _show(ctx: Ctx) -> dict[str, Any]:
    return _one(ctx).public(_who(ctx)[1].now())


def _revoke(ctx: Ctx) -> dict[str, Any]:
    token = _one(ctx)
    service = _who(ctx)[1]
    service.revoke(token.id)
    _distribute(ctx, f"The revocation of token {token.id}",
                "run 'gnt-cluster redist-conf'")
    return token.public(service.now())


_TOKEN_PROPS: dict[str, Any] = {
    "id": STR, "user": STR, "role": STR, "created": {"type": "number"},
    "expires": {"type": "number", "nullable": True}, "comment": STR,
    "expired": {"type": "boolean"}}
_TOKEN: dict[str, Any] = {"type": "object", "properties": _TOKEN_PROPS}
_CREATE_BODY = Body(extra=frozenset({"role", "expires", "expires_in", "comment"}))

ROUTES: list[Route] = [
    Route("/2/tokens", "GET", read=_list, access="auth", role="readonly",
          doc=Doc("API tokens (one's own; an admin's: all)",
                  result={"type": "array", "items": _TOKEN})),
    Route("/2/tokens", "POST", read=_create, access="auth", role="readonly",
          body=_CREATE_BODY,
          doc=Doc("Make an API token for oneself (its text is shown once)",
                  body={"type": "object", "properties": {
                      "role": {**STR, "description": "readonly, operator or admin; at most"
                                                     " one's own (default)"},
                      "expires": {"type": "number", "description": "Unix time"},
                      "expires_in": {"type": "number", "description": "seconds from now"},
                      "comment": STR}},
                  result={**_TOKEN, "properties": {**_TOKEN_PROPS, "token": STR}})),
    Route("/2/tokens/{token_id}", "GET", read=_show, access="auth", role="readonly",
          doc=Doc("One API token", result=_TOKEN)),
    Route("/2/tokens/{token_id}", "DELETE", read=_revoke, access="auth", role="readonly",
          doc=Doc("Revoke an API token (at once)", result=OBJ)),
]
