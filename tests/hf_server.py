"""TEST INFRASTRUCTURE: a small Hugging Face Hub-compatible HTTP server on 127.0.0.1.

It implements the part of the Hub's HTTP API that ``huggingface_hub`` 2.x uses for envhub's
``hf://`` registry, so the tests run the real client (request building, retries, error
classes, downloads) without the internet:

- ``GET /api/whoami-v2``; ``POST /api/repos/create``; ``PUT /api/{type}s/{repo}/settings``
- ``GET /api/{type}s/{repo}[/revision/{rev}]`` (repo and revision info)
- ``POST /api/validate-yaml``; ``POST /api/{type}s/{repo}/preupload/{rev}`` (always "regular")
- ``POST /api/{type}s/{repo}/commit/{rev}`` (NDJSON body; ``parentCommit`` checked, 412 if stale)
- ``POST|DELETE /api/{type}s/{repo}/tag/...``, ``POST /api/{type}s/{repo}/branch/{name}``,
  ``GET /api/{type}s/{repo}/refs``
- ``GET /api/{type}s/{repo}/tree/{rev}[/{path}]``, ``POST /api/{type}s/{repo}/paths-info/{rev}``
- ``HEAD|GET /{type}s/{repo}/resolve/{rev}/{path}`` with Range, ETag, X-Repo-Commit,
  X-Error-Code
- ``GET /api/datasets`` (``filter``, ``search``, ``author``)

Private repositories answer 401 (anonymous) or 404 (no access) with ``X-Error-Code:
RepoNotFound``, as the Hub does; gated ones answer 403 ``GatedRepo`` to users who were not
granted access. Everything is in memory. It is not a Hub: no LFS/Xet, no pagination, no PRs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["HubServer", "Repo"]

_GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"


def _git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    tree: dict[str, bytes]
    date: str


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    gated: bool = False
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    #: Users granted access to a gated repo.
    granted: set[str] = field(default_factory=set)

    @property
    def namespace(self) -> str:
        return self.repo_id.split("/")[0]

    def resolve(self, revision: str) -> Commit | None:
        oid = self.branches.get(revision) or self.tags.get(revision)
        if oid is None and len(revision) == 40:
            oid = revision if revision in self.commits else None
        return self.commits.get(oid) if oid else None

    def card_tags(self) -> list[str]:
        """The ``tags`` of the README's YAML header on main, as the Hub indexes them."""
        import yaml

        head = self.resolve("main")
        readme = head.tree.get("README.md", b"").decode() if head else ""
        if not readme.startswith("---\n"):
            return []
        header = readme[4:].split("\n---\n", 1)[0]
        try:
            tags = (yaml.safe_load(header) or {}).get("tags") or []
        except yaml.YAMLError:
            return []
        return [str(t) for t in tags]


class _Reply(Exception):
    """An error response: raised by handlers, written by the dispatcher."""

    def __init__(self, status: int, message: str, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.extra = status, message, code, extra


class HubServer:
    """The server's state and its HTTP listener; use as a context manager.

    ``tokens`` maps access tokens to user names; ``orgs`` maps organisations to members.
    ``requests`` counts the requests served, keyed by ``"METHOD route"``.
    ``before_commit`` (if set) is called with the repo before a commit is applied: tests
    use it to slip in a concurrent commit.
    """

    def __init__(self, tokens: dict[str, str] | None = None, orgs: dict[str, set[str]] | None = None) -> None:
        self.tokens = dict(tokens or {})
        self.orgs = {k: set(v) for k, v in (orgs or {}).items()}
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: Counter[str] = Counter()
        self.before_commit: Callable[[Repo], None] | None = None
        self.lock = threading.RLock()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        assert self._httpd is not None, "the server is not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HubServer:
        server = self

        class Handler(_Handler):
            hub = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), name="hf-test-server",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- state helpers for tests -----------------------------------------------------------

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> dict[str, bytes]:
        commit = self.repo(repo_id, repo_type).resolve(revision)
        assert commit is not None
        return dict(commit.tree)

    def create_repo(self, repo_id: str, *, private: bool, repo_type: str = "dataset") -> Repo:
        with self.lock:
            repo = Repo(repo_type, repo_id, private)
            initial = self._new_commit(None, "initial commit", {".gitattributes": _GITATTRIBUTES})
            repo.commits[initial.oid] = initial
            repo.branches["main"] = initial.oid
            self.repos[(repo_type, repo_id)] = repo
            return repo

    def commit(self, repo: Repo, tree: dict[str, bytes], title: str, branch: str = "main") -> Commit:
        with self.lock:
            commit = self._new_commit(repo.branches.get(branch), title, tree)
            repo.commits[commit.oid] = commit
            repo.branches[branch] = commit.oid
            return commit

    def _new_commit(self, parent: str | None, title: str, tree: dict[str, bytes]) -> Commit:
        self._counter += 1
        digest = hashlib.sha1(f"{parent}:{title}:{self._counter}:{sorted(tree)}".encode()).hexdigest()
        return Commit(digest, parent, title, tree, time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()))

    # --- access control ----------------------------------------------------------------------

    def user(self, authorization: str | None) -> str | None:
        if not authorization or not authorization.startswith("Bearer "):
            return None
        token = authorization[len("Bearer "):]
        if token not in self.tokens:
            raise _Reply(401, "Invalid credentials in Authorization header")
        return self.tokens[token]

    def may_write(self, user: str | None, namespace: str) -> bool:
        return user is not None and (user == namespace or user in self.orgs.get(namespace, set()))

    def readable(self, repo_type: str, repo_id: str, user: str | None, *, content: bool = False) -> Repo:
        """The repo if ``user`` may read it; else the Hub's answer (401/404, or 403 gated)."""
        repo = self.repos.get((repo_type, repo_id))
        owner = repo is not None and self.may_write(user, repo.namespace)
        if repo is None or (repo.private and not owner):
            if user is None:
                raise _Reply(401, "Repository not found", "RepoNotFound")
            raise _Reply(404, "Repository not found", "RepoNotFound")
        if content and repo.gated and not owner and user not in repo.granted:
            raise _Reply(403, f"Access to dataset {repo_id} is restricted. You must have access to it "
                              "and be authenticated to access it. Please log in.", "GatedRepo")
        return repo

    def writable(self, repo_type: str, repo_id: str, user: str | None) -> Repo:
        repo = self.readable(repo_type, repo_id, user)
        if not self.may_write(user, repo.namespace):
            raise _Reply(403, "You don't have the rights to write to this repository")
        return repo


class _Handler(BaseHTTPRequestHandler):
    """Routes one request to the server's state. Errors are JSON with X-Error-Code headers."""

    hub: HubServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Without it, small responses wait for the peer's delayed ACK (~40 ms per call).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # --- plumbing --------------------------------------------------------------------------

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(data).encode(), headers)

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        self.query = parse_qs(url.query)
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        body = self._body() if method in ("POST", "PUT", "DELETE") else b""
        try:
            with self.hub.lock:
                user = self.hub.user(self.headers.get("Authorization"))
            route, handler, args = self._route(method, parts)
            self.hub.requests[f"{method} {route}"] += 1
            handler(user, body, *args)
        except _Reply as reply:
            headers = {"X-Error-Message": reply.message}
            if reply.code:
                headers["X-Error-Code"] = reply.code
            self._json({"error": reply.message, **reply.extra}, reply.status, headers)

    def _route(self, method: str, parts: list[str]) -> tuple[str, Callable[..., None], tuple[Any, ...]]:
        if parts[:2] == ["api", "whoami-v2"] and method == "GET":
            return "whoami", self.whoami, ()
        if parts[:3] == ["api", "repos", "create"] and method == "POST":
            return "create", self.create, ()
        if parts[:2] == ["api", "validate-yaml"] and method == "POST":
            return "validate-yaml", self.validate_yaml, ()
        if parts == ["api", "datasets"] and method == "GET":
            return "list", self.list_datasets, ()
        if len(parts) >= 4 and parts[0] == "api" and parts[1] in ("models", "datasets", "spaces"):
            repo_type, repo_id, rest = parts[1][:-1], f"{parts[2]}/{parts[3]}", parts[4:]
            action = rest[0] if rest else "info"
            table: dict[tuple[str, str], Callable[..., None]] = {
                ("GET", "info"): self.info, ("GET", "revision"): self.info, ("PUT", "settings"): self.settings,
                ("POST", "preupload"): self.preupload, ("POST", "commit"): self.commit,
                ("POST", "tag"): self.create_tag, ("DELETE", "tag"): self.delete_tag,
                ("POST", "branch"): self.create_branch, ("GET", "refs"): self.refs,
                ("GET", "tree"): self.tree, ("POST", "paths-info"): self.paths_info,
            }
            handler = table.get((method, action))
            if handler is not None:
                return action, handler, (repo_type, repo_id, rest[1:])
        if (len(parts) >= 6 and parts[0] in ("datasets", "spaces") and parts[3] == "resolve"
                and method in ("GET", "HEAD")):
            return "resolve", self.resolve, (parts[0][:-1], f"{parts[1]}/{parts[2]}", parts[4], "/".join(parts[5:]))
        raise _Reply(404, f"no route for {method} /{'/'.join(parts)} in the test server")

    def _commit_of(self, repo: Repo, revision: str) -> Commit:
        commit = repo.resolve(revision)
        if commit is None:
            raise _Reply(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    # --- handlers ------------------------------------------------------------------------------

    def whoami(self, user: str | None, body: bytes) -> None:
        if user is None:
            raise _Reply(401, "Invalid username or password.")
        orgs = [{"name": org} for org, members in sorted(self.hub.orgs.items()) if user in members]
        self._json({"type": "user", "name": user, "orgs": orgs,
                    "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": "write"}}})

    def create(self, user: str | None, body: bytes) -> None:
        payload = json.loads(body)
        repo_type = payload.get("type") or "model"
        repo_id = f"{payload.get('organization') or user}/{payload['name']}"
        with self.hub.lock:
            if user is None:
                raise _Reply(401, "You must be authenticated to create a repository")
            if not self.hub.may_write(user, repo_id.split("/")[0]):
                raise _Reply(403, f"You don't have the rights to create a repository under {repo_id.split('/')[0]}")
            if (repo_type, repo_id) in self.hub.repos:
                raise _Reply(409, f"You already created this {repo_type} repo",
                             url=f"{self.hub.endpoint}/{repo_type}s/{repo_id}")
            private = payload.get("visibility") == "private" or bool(payload.get("private"))
            self.hub.create_repo(repo_id, private=private, repo_type=repo_type)
        self._json({"url": f"{self.hub.endpoint}/{repo_type}s/{repo_id}", "name": repo_id})

    def settings(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        payload = json.loads(body)
        with self.hub.lock:
            repo = self.hub.writable(repo_type, repo_id, user)
            if "private" in payload:
                repo.private = bool(payload["private"])
            if "visibility" in payload:
                repo.private = payload["visibility"] == "private"
            if "gated" in payload:
                repo.gated = payload["gated"] not in (False, None, "false")
        self._json({})

    def info(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        with self.hub.lock:
            repo = self.hub.readable(repo_type, repo_id, user)
            commit = self._commit_of(repo, rest[0] if rest else "main")
            self._json(self._repo_json(repo, commit))

    def _repo_json(self, repo: Repo, commit: Commit) -> dict[str, Any]:
        return {"id": repo.repo_id, "author": repo.namespace, "sha": commit.oid, "private": repo.private,
                "gated": "auto" if repo.gated else False, "disabled": False, "lastModified": commit.date,
                "tags": repo.card_tags(), "siblings": [{"rfilename": p} for p in sorted(commit.tree)]}

    def validate_yaml(self, user: str | None, body: bytes) -> None:
        self._json({"errors": [], "warnings": []})

    def preupload(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        payload = json.loads(body)
        with self.hub.lock:
            repo = self.hub.writable(repo_type, repo_id, user)
            self._commit_of(repo, unquote(rest[0]) if rest else "main")
        files = [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None}
                 for f in payload["files"]]
        self._json({"files": files, "commitOid": None})

    def commit(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        header = next(item["value"] for item in lines if item["key"] == "header")
        branch = unquote(rest[0]) if rest else "main"
        with self.hub.lock:
            repo = self.hub.writable(repo_type, repo_id, user)
            if self.hub.before_commit is not None:
                hook, self.hub.before_commit = self.hub.before_commit, None
                hook(repo)
            if branch not in repo.branches:
                raise _Reply(404, f"Invalid rev id: {branch}", "RevisionNotFound")
            head = repo.commits[repo.branches[branch]]
            parent = header.get("parentCommit")
            if parent is not None and not head.oid.startswith(parent):
                raise _Reply(412, "A commit has happened since. Please refresh and try again.")
            tree = dict(head.tree)
            for item in lines:
                key, value = item["key"], item["value"]
                if key == "file":
                    tree[value["path"]] = base64.b64decode(value["content"])
                elif key == "deletedFile":
                    if value["path"] not in tree:
                        raise _Reply(404, f"A file with this name doesn't exist: {value['path']}", "EntryNotFound")
                    del tree[value["path"]]
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    for path in [p for p in tree if p.startswith(prefix)]:
                        del tree[path]
                elif key != "header":
                    raise _Reply(400, f"the test server does not support {key!r} operations")
            commit = self.hub.commit(repo, tree, header["summary"], branch)
        self._json({"commitUrl": f"{self.hub.endpoint}/{repo_type}s/{repo_id}/commit/{commit.oid}",
                    "commitOid": commit.oid, "success": True})

    def create_tag(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        payload = json.loads(body)
        with self.hub.lock:
            repo = self.hub.writable(repo_type, repo_id, user)
            commit = self._commit_of(repo, unquote("/".join(rest)) if rest else "main")
            if payload["tag"] in repo.tags:
                raise _Reply(409, f"Tag {payload['tag']} already exists")
            repo.tags[payload["tag"]] = commit.oid
        self._json({})

    def delete_tag(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        with self.hub.lock:
            repo = self.hub.writable(repo_type, repo_id, user)
            if repo.tags.pop(unquote("/".join(rest)), None) is None:
                raise _Reply(404, "Tag not found", "RevisionNotFound")
        self._json({})

    def create_branch(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        payload = json.loads(body) if body else {}
        with self.hub.lock:
            repo = self.hub.writable(repo_type, repo_id, user)
            name = unquote("/".join(rest))
            if name in repo.branches:
                raise _Reply(409, f"Branch {name} already exists")
            repo.branches[name] = self._commit_of(repo, payload.get("startingPoint") or "main").oid
        self._json({})

    def refs(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        with self.hub.lock:
            repo = self.hub.readable(repo_type, repo_id, user)

            def refs(kind: str, table: dict[str, str]) -> list[dict[str, str]]:
                return [{"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": oid} for n, oid in sorted(table.items())]

            data = {"branches": refs("heads", repo.branches), "converts": [], "tags": refs("tags", repo.tags)}
        if "include_prs" in self.query:
            data["pullRequests"] = []
        self._json(data)

    def _entries(self, commit: Commit, paths: list[str], recursive: bool) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for wanted in paths:
            wanted = wanted.strip("/")
            if wanted in commit.tree:
                data = commit.tree[wanted]
                out.append({"type": "file", "path": wanted, "size": len(data), "oid": _git_blob_sha(data)})
                continue
            prefix = f"{wanted}/" if wanted else ""
            seen_dirs: set[str] = set()
            for path in sorted(commit.tree):
                if not path.startswith(prefix):
                    continue
                rest = path[len(prefix):]
                if "/" in rest and not recursive:
                    folder = prefix + rest.split("/", 1)[0]
                    if folder not in seen_dirs:
                        seen_dirs.add(folder)
                        oid = hashlib.sha1(folder.encode()).hexdigest()
                        out.append({"type": "directory", "path": folder, "oid": oid})
                    continue
                data = commit.tree[path]
                out.append({"type": "file", "path": path, "size": len(data), "oid": _git_blob_sha(data)})
        return out

    def tree(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        with self.hub.lock:
            repo = self.hub.readable(repo_type, repo_id, user)
            commit = self._commit_of(repo, unquote(rest[0]) if rest else "main")
            path = "/".join(rest[1:])
            recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
            entries = self._entries(commit, [path], recursive)
            if path and not entries:
                raise _Reply(404, f"{path} does not exist", "EntryNotFound")
        self._json(entries)

    def paths_info(self, user: str | None, body: bytes, repo_type: str, repo_id: str, rest: list[str]) -> None:
        form = parse_qs(body.decode())
        with self.hub.lock:
            repo = self.hub.readable(repo_type, repo_id, user)
            commit = self._commit_of(repo, unquote(rest[0]) if rest else "main")
            out = []
            for path in form.get("paths", []):
                path = path.strip("/")
                if path in commit.tree:
                    out.extend(self._entries(commit, [path], False))
                elif any(p.startswith(path + "/") for p in commit.tree):
                    out.append({"type": "directory", "path": path, "oid": hashlib.sha1(path.encode()).hexdigest()})
        self._json(out)

    def resolve(self, user: str | None, body: bytes, repo_type: str, repo_id: str, revision: str, path: str) -> None:
        with self.hub.lock:
            repo = self.hub.readable(repo_type, repo_id, user, content=True)
            commit = self._commit_of(repo, revision)
            if path not in commit.tree:
                raise _Reply(404, "Entry not found", "EntryNotFound")
            data = commit.tree[path]
        headers = {"X-Repo-Commit": commit.oid, "ETag": f'"{_git_blob_sha(data)}"', "Accept-Ranges": "bytes"}
        range_header = self.headers.get("Range")
        if range_header and range_header.startswith("bytes="):
            start_text, _, end_text = range_header[len("bytes="):].partition("-")
            start = int(start_text or 0)
            end = int(end_text) if end_text else len(data) - 1
            if start >= len(data) and data:
                self._send(416, b"", {**headers, "Content-Range": f"bytes */{len(data)}"})
                return
            headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
            self._send(206, data[start:end + 1], headers, "application/octet-stream")
            return
        self._send(200, data, headers, "application/octet-stream")

    def list_datasets(self, user: str | None, body: bytes) -> None:
        filters = self.query.get("filter", [])
        search = (self.query.get("search", [""])[0]).lower()
        author = self.query.get("author", [None])[0]
        out = []
        with self.hub.lock:
            for (repo_type, repo_id), repo in sorted(self.hub.repos.items()):
                if repo_type != "dataset":
                    continue
                if repo.private and not self.hub.may_write(user, repo.namespace):
                    continue
                tags = repo.card_tags()
                if any(f not in tags for f in filters) or search not in repo_id.lower():
                    continue
                if author is not None and repo.namespace != author:
                    continue
                head = repo.commits[repo.branches["main"]]
                out.append({"id": repo_id, "author": repo.namespace, "sha": head.oid, "private": repo.private,
                            "tags": tags, "lastModified": head.date})
        self._json(out)
