"""A local, in-thread HTTP server that speaks enough of the Hugging Face Hub API for tests.

It implements what ``huggingface_hub`` (``create_repo``, ``create_branch``, ``upload_folder``,
``repo_info``, ``hf_hub_download``, ``snapshot_download``) and ``transformers``
(``from_pretrained``, ``trust_remote_code``) call, storing every repository revision as
plain files under a temporary directory:

    <root>/<type>s/<owner>/<name>/<revision>/<path>

Failures can be injected per request (:meth:`HubServer.fail`) to test retries, and every
request is logged (:attr:`HubServer.requests`) with its ``Authorization`` header so tests can
assert on authentication. Point clients at it with ``HF_ENDPOINT=server.url``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

REPO_TYPES = ("model", "dataset", "space")
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass
class LoggedRequest:
    """One request the server received."""

    method: str
    path: str
    authorization: str | None


@dataclass
class Failure:
    """A failure to inject into requests whose ``METHOD path`` matches ``pattern``.

    ``status`` is the HTTP status to answer with, or ``None`` to drop the connection without
    an answer (what a client sees on a timeout / reset). ``times`` is how many matching
    requests fail before the server behaves normally again. ``echo_auth`` puts the request's
    ``Authorization`` header in the error body, as a careless proxy might, so tests can check
    that clients scrub it. ``when`` is where a dropped connection (``status=None``) breaks:
    ``"before"`` the request is handled, ``"mid-body"`` after half of the request body arrived
    (an upload cut off: nothing is applied), or ``"after"`` the request was handled (a commit
    is applied) but before the answer (the client cannot tell that it landed).
    """

    pattern: str
    status: int | None = 500
    times: int = 1
    echo_auth: bool = False
    when: str = "before"


@dataclass
class Repo:
    """A repository on the fake Hub."""

    repo_type: str
    repo_id: str
    private: bool
    sdk: str | None = None
    commits: list[dict] = field(default_factory=list)


class HubServer:
    """A thread-backed fake Hub. Use as a context manager or call :meth:`start`/:meth:`stop`."""

    def __init__(self, root: Path, *, require_token_for_writes: bool = True):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.require_token_for_writes = require_token_for_writes
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[LoggedRequest] = []
        self.failures: list[Failure] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321`` (use it as ``HF_ENDPOINT``)."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> HubServer:
        """Start serving on a free localhost port in a daemon thread."""
        server = self

        class Handler(_Handler):
            hub = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the server and join its thread."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> HubServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------- helpers
    def fail(
        self,
        pattern: str,
        status: int | None = 500,
        times: int = 1,
        echo_auth: bool = False,
        when: str = "before",
    ) -> Failure:
        """Make the next ``times`` requests matching the regex ``pattern`` fail (see
        :class:`Failure`)."""
        if when not in ("before", "mid-body", "after") or (when != "before" and status):
            raise ValueError(f"when={when!r}: 'before', or with status=None 'mid-body' / 'after'")
        failure = Failure(pattern, status, times, echo_auth, when)
        with self._lock:
            self.failures.append(failure)
        return failure

    def drop_mid_commit(self, times: int = 1, *, applied: bool = False) -> Failure:
        """Drop the connection of the next ``times`` commits of any repository: half-way
        through the upload (nothing applied), or, with ``applied``, once the commit is applied
        but before the client hears so."""
        return self.fail(
            r"POST /api/\w+s/.*/commit/", None, times, when="after" if applied else "mid-body"
        )

    def repo(self, repo_id: str, repo_type: str = "model") -> Repo:
        """The stored repository (``KeyError`` when it was never created)."""
        return self.repos[(repo_type, repo_id)]

    def revision_dir(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> Path:
        """The folder holding the files of ``repo_id`` at ``revision`` (a branch or commit id).

        A commit id resolves to its branch's current files: tests only read the latest commit.
        """
        repo = self.repos.get((repo_type, repo_id))
        for commit in repo.commits if repo else ():
            if commit["oid"] == revision:
                revision = commit["revision"]
        return self.root / f"{repo_type}s" / repo_id / revision

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "model") -> list[str]:
        """Sorted relative paths of the files committed at ``revision``."""
        base = self.revision_dir(repo_id, revision, repo_type)
        if not base.is_dir():
            return []
        return sorted(p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file())

    def resolved(self, repo_id: str, suffix: str) -> bool:
        """Whether a client downloaded a file of the model (or dataset / Space) ``repo_id``
        whose path ends with ``suffix`` (a ``/resolve/`` request was logged)."""
        return any(
            r.path.startswith(f"/{repo_id}/resolve/") and r.path.endswith(suffix)
            for r in self.requests
        )

    def download(self, repo_id: str, dest: Path, repo_type: str = "model") -> Path:
        """``repo_id`` downloaded from this server into ``dest`` as a client does
        (``HfApi.snapshot_download``); returns ``dest``."""
        from huggingface_hub import HfApi

        return Path(
            HfApi(endpoint=self.url).snapshot_download(repo_id, repo_type=repo_type, local_dir=dest)
        )

    def _take_failure(self, method: str, path: str) -> Failure | None:
        key = f"{method} {path}"
        with self._lock:
            for failure in self.failures:
                if failure.times > 0 and re.search(failure.pattern, key):
                    failure.times -= 1
                    return failure
        return None

    def _sha(self, repo: Repo, revision: str) -> str:
        if any(c["oid"] == revision for c in repo.commits):
            return revision  # asked by commit id (as transformers does once it resolved one)
        commits = [c for c in repo.commits if c["revision"] == revision]
        if commits:
            return commits[-1]["oid"]
        return hashlib.sha1(f"{repo.repo_id}@init".encode()).hexdigest()


_API_REPO = re.compile(
    r"^/api/(?P<type>models|datasets|spaces)/(?P<id>[^/]+/[^/]+)(?:/(?P<rest>.*))?$"
)
_RESOLVE = re.compile(
    r"^/(?:(?P<prefix>datasets|spaces)/)?(?P<id>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$"
)


class _Handler(BaseHTTPRequestHandler):
    """Request handler; ``hub`` is bound to the owning :class:`HubServer` by a subclass."""

    hub: HubServer
    protocol_version = "HTTP/1.1"
    _silent = False

    def log_message(self, format, *args):  # noqa: A002 - silence stderr logging
        pass

    # ------------------------------------------------------------------ plumbing
    def _send(self, status: int, body: bytes | dict | list = b"", headers: dict | None = None):
        if self._silent:
            return
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, message: str, code: str | None = None):
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._send(status, {"error": message}, headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _dispatch(self):
        path = unquote(urlsplit(self.path).path)
        auth = self.headers.get("Authorization")
        self.hub.requests.append(LoggedRequest(self.command, path, auth))
        failure = self.hub._take_failure(self.command, path)
        if failure is not None and failure.when != "before":
            if failure.when == "mid-body":
                self.rfile.read(int(self.headers.get("Content-Length") or 0) // 2)
            else:
                self._silent = True  # handled below, the answer is never sent
                try:
                    self._route(path)
                finally:
                    self._silent = False
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if failure is not None:
            self._body()
            if failure.status is None:  # drop the connection: the client sees a reset
                self.close_connection = True
                self.connection.shutdown(2)
                return
            message = "Injected server error"
            if failure.echo_auth:
                message += f" (request had Authorization: {auth})"
            self._error(failure.status, message)
            return
        try:
            self._route(path)
        except Exception as exc:  # report bugs in the fake as 500s with the reason
            self._error(500, f"fake hub crashed: {exc!r}")

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = _dispatch

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization") or ""
        return auth.startswith("Bearer ") and len(auth) > len("Bearer ")

    # -------------------------------------------------------------------- routes
    def _route(self, path: str):
        if self.command == "POST" and path == "/api/repos/create":
            return self._create_repo()
        if self.command == "POST" and path == "/api/validate-yaml":
            self._body()
            return self._send(200, {"errors": [], "warnings": []})
        if path == "/api/whoami-v2":
            return self._whoami()
        if m := _API_REPO.match(path):
            return self._api_repo(m["type"][:-1], m["id"], m["rest"] or "")
        if (m := _RESOLVE.match(path)) and self.command in ("GET", "HEAD"):
            repo_type = (m["prefix"] or "models")[:-1]
            return self._resolve(repo_type, m["id"], m["rev"], m["file"])
        self._error(404, f"no route for {self.command} {path}")

    def _whoami(self):
        if not self._authorized():
            return self._error(401, "Invalid credentials in Authorization header")
        self._send(200, {"type": "user", "name": "tester", "orgs": []})

    def _create_repo(self):
        if self.hub.require_token_for_writes and not self._authorized():
            self._body()
            return self._error(401, "Invalid credentials in Authorization header")
        payload = json.loads(self._body() or b"{}")
        repo_type = payload.get("type") or "model"
        owner = payload.get("organization") or "tester"
        repo_id = f"{owner}/{payload['name']}"
        key = (repo_type, repo_id)
        url = f"{self.hub.url}/{_URL_PREFIX[repo_type]}{repo_id}"
        if key in self.hub.repos:  # the Hub's answer carries the url (create_repo exist_ok)
            message = "You already created this repo"
            return self._send(409, {"error": message, "url": url}, {"X-Error-Message": message})
        if repo_type == "space" and payload.get("sdk") not in ("gradio", "docker", "static"):
            return self._error(400, "Invalid sdk")
        private = payload.get("visibility") == "private" or bool(payload.get("private"))
        self.hub.repos[key] = Repo(repo_type, repo_id, private, payload.get("sdk"))
        self.hub.revision_dir(repo_id, "main", repo_type).mkdir(parents=True, exist_ok=True)
        self._send(200, {"url": url, "name": repo_id, "id": repo_id})

    def _lookup(self, repo_type: str, repo_id: str) -> Repo | None:
        repo = self.hub.repos.get((repo_type, repo_id))
        if repo is None or (repo.private and not self._authorized()):
            self._error(404 if repo is None else 401, "Repository not found", "RepoNotFound")
            return None
        return repo

    def _api_repo(self, repo_type: str, repo_id: str, rest: str):
        body = self._body() if self.command in ("POST", "PUT") else b""
        repo = self._lookup(repo_type, repo_id)
        if repo is None:
            return
        action, _, arg = rest.partition("/")
        if self.command == "POST" and action in ("preupload", "commit", "branch"):
            if self.hub.require_token_for_writes and not self._authorized():
                return self._error(401, "Invalid credentials in Authorization header")
        if self.command == "POST" and action == "preupload":
            files = json.loads(body)["files"]
            return self._send(
                200,
                {
                    "files": [
                        {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                        for f in files
                    ]
                },
            )
        if self.command == "POST" and action == "commit":
            return self._commit(repo, arg or "main", body)
        if self.command == "POST" and action == "branch":
            return self._create_branch(repo, arg)
        if self.command == "GET" and action in ("", "revision"):
            return self._info(repo, arg or "main")
        if self.command == "GET" and action == "tree":
            revision, _, sub = arg.partition("/")
            return self._tree(repo, revision, sub)
        self._error(404, f"no route for {self.command} {rest!r}")

    def _commit(self, repo: Repo, revision: str, body: bytes):
        base = self.hub.revision_dir(repo.repo_id, revision, repo.repo_type)
        if not base.is_dir():
            return self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        header, writes, deletes = {}, {}, []
        for line in body.splitlines():
            item = json.loads(line)
            if item["key"] == "header":
                header = item["value"]
            elif item["key"] == "file":
                value = item["value"]
                if value.get("encoding") != "base64":
                    return self._error(400, "only base64 files are supported by the fake hub")
                writes[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] in ("deletedFile", "deletedFolder"):
                deletes.append(item["value"]["path"])
            else:
                return self._error(400, f"unsupported commit operation {item['key']!r}")
        # Apply atomically: build the new revision next to the old one, then swap.
        staging = base.with_name(f".{revision}.staging-{time.monotonic_ns()}")
        shutil.copytree(base, staging)
        for rel in deletes:
            target = staging / rel
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        for rel, content in writes.items():
            target = staging / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        old = base.with_name(f".{revision}.old-{time.monotonic_ns()}")
        base.rename(old)
        staging.rename(base)
        shutil.rmtree(old)
        oid = hashlib.sha1(
            f"{repo.repo_id}{len(repo.commits)}{time.time_ns()}".encode()
        ).hexdigest()
        repo.commits.append(
            {"oid": oid, "revision": revision, "summary": header.get("summary"), "files": writes}
        )
        prefix = _URL_PREFIX[repo.repo_type]
        self._send(
            200,
            {
                "success": True,
                "commitOid": oid,
                "commitUrl": f"{self.hub.url}/{prefix}{repo.repo_id}/commit/{oid}",
                "pullRequestUrl": None,
            },
        )

    def _create_branch(self, repo: Repo, branch: str):
        target = self.hub.revision_dir(repo.repo_id, branch, repo.repo_type)
        if target.exists():
            return self._error(409, f"Reference already exists: {branch}")
        shutil.copytree(self.hub.revision_dir(repo.repo_id, "main", repo.repo_type), target)
        self._send(200, {})

    def _info(self, repo: Repo, revision: str):
        base = self.hub.revision_dir(repo.repo_id, revision, repo.repo_type)
        if not base.is_dir():
            return self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        files = self.hub.files(repo.repo_id, revision, repo.repo_type)
        info = {
            "id": repo.repo_id,
            "_id": repo.repo_id,
            "private": repo.private,
            "sha": self.hub._sha(repo, revision),
            "siblings": [{"rfilename": f, "size": (base / f).stat().st_size} for f in files],
            "tags": [],
        }
        if repo.sdk:
            info["sdk"] = repo.sdk
        self._send(200, info)

    def _tree(self, repo: Repo, revision: str, sub: str):
        base = self.hub.revision_dir(repo.repo_id, revision, repo.repo_type)
        if not base.is_dir():
            return self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        entries = []
        for rel in self.hub.files(repo.repo_id, revision, repo.repo_type):
            if sub and not rel.startswith(sub.rstrip("/") + "/"):
                continue
            data = (base / rel).read_bytes()
            entries.append({"type": "file", "path": rel, "size": len(data), "oid": _git_oid(data)})
        self._send(200, entries)

    def _resolve(self, repo_type: str, repo_id: str, revision: str, rel: str):
        repo = self._lookup(repo_type, repo_id)
        if repo is None:
            return
        base = self.hub.revision_dir(repo_id, revision, repo_type)
        if not base.is_dir():
            return self._error(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        target = base / rel
        if not target.is_file():
            return self._error(404, "Entry not found", "EntryNotFound")
        data = target.read_bytes()
        headers = {
            "ETag": f'"{_git_oid(data)}"',
            "X-Repo-Commit": self.hub._sha(repo, revision),
            "Content-Type": "application/octet-stream",
        }
        self._send(200, data, headers)


def _git_oid(data: bytes) -> str:
    """The git blob id of ``data`` (what the Hub reports as a regular file's ETag)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
