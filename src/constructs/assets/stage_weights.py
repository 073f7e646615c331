"""Stage one model revision from the Hugging Face Hub into S3, once.

What it does: lists the files of ``--repo`` at the commit ``--revision`` on the Hub, lists
what is already under ``s3://--bucket/--prefix``, copies every file that is not already
there (same size and the same Hub content id in the object's ``hub-oid`` metadata) by
streaming it from the Hub into an S3 (multipart) upload, and, once every file is staged and
verified, writes a manifest at ``<prefix without its trailing slash>.manifest.json``, beside
the weights and outside the prefix.

Usage:
  stage_weights.py --repo ORG/NAME --revision <40-hex commit> --bucket B --prefix ORG/NAME/REV/
                   --region R [--workers 8] [--part-size-mib 64]
                   [--hub-endpoint https://huggingface.co]

Guarantees:
  * An object is completed only when its bytes have the Hub's size and hash (sha256 for LFS
    files, the git blob sha1 otherwise); a mismatch aborts the upload and fails the file.
  * Every object carries metadata `hub-oid` (the Hub's content id) and `sha256`, both set
    when the upload is created. (The one exception: a non-LFS file larger than a part has
    no `sha256`, as it is not known before its bytes are; its `hub-oid` is its git sha1.)
  * Every multipart upload this program starts is completed or aborted before it exits
    (SIGTERM included).
  * Nothing is written anywhere but S3: no local file. At most two parts per worker are held
    in memory.
  * Nothing is ever deleted. Objects under the prefix that the Hub does not list are left
    alone.
  * The Hub token (env ``HF_TOKEN``, optional) is sent only to the Hub's own origin, never to
    a host a redirect names (the CDN), and is never printed.
  * Idempotent: a second run with everything present copies nothing and writes the same
    manifest bytes.

Exit codes:
  0  every file is staged and verified, and the manifest is written
  1  a file (or the listing, or S3) failed after retries; no manifest is written
  2  bad arguments, or a hostile or oversized listing from the Hub

Standard library and boto3 only. boto3 finds its endpoint, region and credentials as usual
(``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, the container credential provider of EKS Pod
Identity, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import http.client
import json
import math
import os
import random
import re
import signal
import socket
import ssl
import sys
import threading
import time
import urllib.parse
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from email.utils import parsedate_to_datetime
from typing import Callable, Iterable, Mapping, NamedTuple, Optional, TypeVar

import boto3
import botocore.config
import botocore.exceptions

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2

MIB = 1024 * 1024
MAX_FILES = 100_000
MAX_ENTRIES = 200_000
MAX_PAGES = 10_000
MAX_PAGE_BYTES = 64 * MIB
MAX_PATH_BYTES = 1024
MAX_KEY_BYTES = 1024
MAX_PARTS = 10_000
MIN_PART = 5 * MIB
MAX_PART = 5 * 1024 * MIB
MAX_REDIRECTS = 10
MAX_ATTEMPTS = 8
MAX_BACKOFF_SECONDS = 60.0
MAX_RETRY_AFTER_SECONDS = 300.0
CONNECT_TIMEOUT = 30.0
READ_TIMEOUT = 120.0
READ_CHUNK = 1 * MIB
USER_AGENT = "hyperforge-stage-weights/1"

REPO_RE = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
SHA1_RE = re.compile(r"^[0-9a-f]{40}$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
REGION_RE = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-[0-9]+$")
BUCKET_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
IPV4_RE = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
S3_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "RequestTimeout",
        "RequestTimeoutException",
        "InternalError",
        "ServiceUnavailable",
        "503",
        "500",
    }
)


class BadInput(Exception):
    """Bad arguments or a hostile listing: exit 2."""


class Failed(Exception):
    """A non-transient failure (of one file, the listing or S3): exit 1."""


class Transient(Exception):
    """A failure worth retrying; `retry_after` is the server's hint in seconds, if any."""

    def __init__(self, message: str, retry_after: Optional[float] = None):
        super().__init__(message)
        self.retry_after = retry_after


class Stopped(Exception):
    """The run is being stopped (a signal, or another part failed fatally)."""


# --------------------------------------------------------------------------------------
# The model: Hub files, staged objects, the plan.


@dataclasses.dataclass(frozen=True)
class HubFile:
    """One file of the Hub listing. `oid` is the git blob sha1; `lfs_oid` the sha256."""

    path: str
    size: int
    oid: str
    lfs_oid: Optional[str] = None

    @property
    def is_lfs(self) -> bool:
        return self.lfs_oid is not None

    @property
    def content_id(self) -> str:
        """What the object's `hub-oid` metadata must equal."""
        return self.lfs_oid if self.lfs_oid is not None else self.oid

    @property
    def hash_name(self) -> str:
        return "sha256" if self.is_lfs else "git_sha1"


class StagedObject(NamedTuple):
    """An object under the prefix: its size and its `hub-oid` metadata (None if absent or
    not read)."""

    size: int
    hub_oid: Optional[str]


class Decision(NamedTuple):
    file: HubFile
    reason: str


class Plan(NamedTuple):
    copy: list  # list[Decision], by path
    skip: list  # list[Decision], by path

    def files_to_copy(self) -> list:
        return [d.file for d in self.copy]


def plan(hub_files: Iterable[HubFile], staged: Mapping[str, StagedObject]) -> Plan:
    """Which files to copy and which to skip, with the reason, in path order.

    Pure. A file is skipped iff an object exists at its path (relative to the prefix) with
    the same size and a `hub-oid` equal to the Hub's content id (`lfs.oid` for LFS files,
    `oid` otherwise). Everything else is copied. `staged` maps paths relative to the prefix
    to what is there.
    """
    copy, skip = [], []
    for f in sorted(hub_files, key=lambda f: f.path):
        have = staged.get(f.path)
        if have is None:
            copy.append(Decision(f, "missing"))
        elif have.size != f.size:
            copy.append(Decision(f, f"size {have.size} differs from the Hub's {f.size}"))
        elif have.hub_oid is None:
            copy.append(Decision(f, "no hub-oid metadata"))
        elif have.hub_oid != f.content_id:
            copy.append(Decision(f, f"hub-oid {have.hub_oid} differs from the Hub's {f.content_id}"))
        else:
            skip.append(Decision(f, "present with the same size and hub-oid"))
    return Plan(copy, skip)


def new_hasher(f: HubFile):
    """The hash the Hub's content id is: sha256 of the bytes for LFS files, the git blob
    sha1 (of `blob <size>\\0` + bytes) otherwise."""
    if f.is_lfs:
        return hashlib.sha256()
    h = hashlib.sha1()
    h.update(b"blob %d\0" % f.size)
    return h


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def manifest_key(prefix: str) -> str:
    return prefix.rstrip("/") + ".manifest.json"


def manifest_bytes(repo: str, revision: str, prefix: str, files: Iterable[HubFile]) -> bytes:
    """The manifest: deterministic bytes (sorted by path, sorted keys, ASCII, one trailing
    newline)."""
    ordered = sorted(files, key=lambda f: f.path)
    entries = []
    for f in ordered:
        entry = {"path": f.path, "size": f.size, "hub_oid": f.content_id}
        if f.is_lfs:
            entry["sha256"] = f.lfs_oid
        else:
            entry["git_sha1"] = f.oid
        entries.append(entry)
    doc = {
        "repo": repo,
        "revision": revision,
        "prefix": prefix,
        "total_bytes": sum(f.size for f in ordered),
        "files": entries,
    }
    return (json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=True) + "\n").encode("ascii")


# --------------------------------------------------------------------------------------
# Validation of arguments and of the listing.


def check_path(path: object) -> str:
    """A Hub path is refused (BadInput naming it) when it is not a safe relative path."""
    if not isinstance(path, str) or not path:
        raise BadInput(f"hostile listing: path {path!r} is not a non-empty string")
    shown = ascii(path)
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise BadInput(f"hostile listing: path {shown[:80]}... is longer than {MAX_PATH_BYTES} bytes")
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in path):
        raise BadInput(f"hostile listing: path {shown} has a control character")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in path):
        raise BadInput(f"hostile listing: path {shown} is not valid Unicode")
    if "\\" in path:
        raise BadInput(f"hostile listing: path {shown} has a backslash")
    if path.startswith("/"):
        raise BadInput(f"hostile listing: path {shown} is absolute")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise BadInput(f"hostile listing: path {shown} has an empty, '.' or '..' segment")
    return path


def check_repo(repo: str) -> str:
    if not REPO_RE.match(repo) or any(part in (".", "..") for part in repo.split("/")):
        raise BadInput(f"--repo {ascii(repo)}: expected ORG/NAME of [A-Za-z0-9_.-]")
    return repo


def check_revision(revision: str) -> str:
    if not REVISION_RE.match(revision):
        raise BadInput(f"--revision {ascii(revision)}: expected a commit, exactly 40 lowercase hex digits")
    return revision


def check_prefix(prefix: str) -> str:
    if not prefix.endswith("/"):
        raise BadInput(f"--prefix {ascii(prefix)}: must end with '/'")
    if prefix.startswith("/"):
        raise BadInput(f"--prefix {ascii(prefix)}: must not start with '/'")
    if ".." in prefix:
        raise BadInput(f"--prefix {ascii(prefix)}: must not contain '..'")
    if "\\" in prefix or any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in prefix):
        raise BadInput(f"--prefix {ascii(prefix)}: must not contain backslashes or control characters")
    if any(segment in ("", ".") for segment in prefix[:-1].split("/")):
        raise BadInput(f"--prefix {ascii(prefix)}: must not have empty or '.' segments")
    if len(prefix.encode("utf-8", "surrogatepass")) > 512:
        raise BadInput(f"--prefix {ascii(prefix)}: longer than 512 bytes")
    return prefix


def check_bucket(bucket: str) -> str:
    problems = []
    if not BUCKET_RE.match(bucket):
        problems.append("3 to 63 characters of a-z, 0-9, '.', '-', starting and ending with a letter or digit")
    if ".." in bucket or ".-" in bucket or "-." in bucket:
        problems.append("no '..', '.-' or '-.'")
    if IPV4_RE.match(bucket):
        problems.append("not an IP address")
    if bucket.startswith(("xn--", "sthree-", "amzn-s3-demo-")):
        problems.append("no reserved prefix (xn--, sthree-, amzn-s3-demo-)")
    if bucket.endswith(("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")):
        problems.append("no reserved suffix")
    if problems:
        raise BadInput(f"--bucket {ascii(bucket)}: not a valid bucket name ({'; '.join(problems)})")
    return bucket


def check_region(region: str) -> str:
    if not REGION_RE.match(region):
        raise BadInput(f"--region {ascii(region)}: expected an AWS region such as us-west-2")
    return region


def check_hub(endpoint: str) -> str:
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise BadInput(f"--hub-endpoint {ascii(endpoint)}: expected an http(s) URL")
    if parts.username or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise BadInput(f"--hub-endpoint {ascii(endpoint)}: expected scheme://host[:port] only")
    try:
        parts.port
    except ValueError:
        raise BadInput(f"--hub-endpoint {ascii(endpoint)}: bad port") from None
    return f"{parts.scheme}://{parts.netloc}"


def check_token(token: Optional[str]) -> Optional[str]:
    if token is None:
        return None
    token = token.strip()
    if not token:
        return None
    if any(ord(c) < 0x21 or ord(c) > 0x7E for c in token):
        raise BadInput("HF_TOKEN has characters that cannot go in an HTTP header (its value is not shown)")
    return token


def parse_file_entry(entry: object) -> Optional[HubFile]:
    """One entry of the tree listing: a HubFile, None for a directory, BadInput otherwise."""
    if not isinstance(entry, dict):
        raise BadInput(f"hostile listing: entry {ascii(entry)[:200]} is not an object")
    path = check_path(entry.get("path"))
    kind = entry.get("type")
    if kind == "directory":
        return None
    if kind != "file":
        raise BadInput(f"hostile listing: path {ascii(path)} has type {ascii(kind)}")
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0 or size > 5 * 1024**4:
        raise BadInput(f"hostile listing: path {ascii(path)} has size {ascii(size)}")
    oid = entry.get("oid")
    if not isinstance(oid, str) or not SHA1_RE.match(oid):
        raise BadInput(f"hostile listing: path {ascii(path)} has oid {ascii(oid)}")
    lfs = entry.get("lfs")
    lfs_oid = None
    if lfs is not None:
        if not isinstance(lfs, dict):
            raise BadInput(f"hostile listing: path {ascii(path)} has lfs {ascii(lfs)[:200]}")
        lfs_oid = lfs.get("oid")
        if lfs_oid is None and isinstance(lfs.get("sha256"), str):
            lfs_oid = lfs.get("sha256")
        if not isinstance(lfs_oid, str) or not SHA256_RE.match(lfs_oid):
            raise BadInput(f"hostile listing: path {ascii(path)} has lfs.oid {ascii(lfs_oid)}")
        if lfs.get("size", size) != size:
            raise BadInput(f"hostile listing: path {ascii(path)} has lfs.size {ascii(lfs.get('size'))} != size {size}")
    return HubFile(path=path, size=size, oid=oid, lfs_oid=lfs_oid)


def parse_next_link(header: Optional[str], base_url: str) -> Optional[str]:
    """The `rel="next"` target of a Link header, resolved against `base_url`, or None."""
    if not header:
        return None
    for match in re.finditer(r"<([^>]*)>((?:\s*;\s*[^;,]*)*)", header):
        target, params = match.group(1), match.group(2)
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "rel" and "next" in value.strip().strip('"').lower().split():
                return urllib.parse.urljoin(base_url, target.strip())
    return None


# --------------------------------------------------------------------------------------
# HTTP with our own redirect handling.


def origin(url: str) -> tuple:
    parts = urllib.parse.urlsplit(url)
    default = 443 if parts.scheme == "https" else 80
    return (parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default)


def auth_headers(url: str, hub: str, token: Optional[str]) -> dict:
    """The Authorization header for `url`: the bearer token for the Hub's own origin
    (scheme, host and port), nothing for any other (a CDN's signed URL rejects a second
    authentication mechanism)."""
    if token and origin(url) == origin(hub):
        return {"Authorization": f"Bearer {token}"}
    return {}


def redact(url: str) -> str:
    """A URL for messages: no query (signed URLs carry credentials) and no user info."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def retry_after_seconds(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    if math.isnan(seconds):
        return None
    return max(0.0, min(seconds, MAX_RETRY_AFTER_SECONDS))


class Http:
    """GET with redirects followed by hand, so the token goes only to the Hub's origin."""

    def __init__(self, hub: str, token: Optional[str]):
        self.hub = hub
        self.token = token
        self.tls = ssl.create_default_context()

    def get(self, url: str, headers: Optional[dict] = None):
        """Open `url`, following redirects. Returns (connection, response, final_url) for a
        2xx answer; raises Transient for 429/5xx/408 and connection errors, Failed for other
        statuses."""
        hub_scheme = urllib.parse.urlsplit(self.hub).scheme
        for _ in range(MAX_REDIRECTS + 1):
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise Failed(f"refusing to fetch {redact(url)}: not an http(s) URL")
            if hub_scheme == "https" and parts.scheme != "https":
                raise Failed(f"refusing a redirect to plain http: {redact(url)}")
            send = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
            send.update(headers or {})
            send.update(auth_headers(url, self.hub, self.token))
            target = parts.path or "/"
            if parts.query:
                target += "?" + parts.query
            if parts.scheme == "https":
                conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT, context=self.tls)
            else:
                conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CONNECT_TIMEOUT)
            try:
                conn.request("GET", target, headers=send)
                if conn.sock is not None:
                    conn.sock.settimeout(READ_TIMEOUT)
                resp = conn.getresponse()
            except ssl.SSLCertVerificationError as e:
                conn.close()
                raise Failed(f"{redact(url)}: TLS verification failed: {e}") from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                raise Transient(f"{redact(url)}: {type(e).__name__}: {e}") from None
            status = resp.status
            if status in REDIRECT_STATUSES:
                location = resp.getheader("Location")
                drain(resp)
                conn.close()
                if not location:
                    raise Failed(f"{redact(url)}: redirect {status} without a Location")
                url = urllib.parse.urljoin(url, location)
                continue
            if 200 <= status < 300:
                return conn, resp, url
            retry_after = retry_after_seconds(resp.getheader("Retry-After"))
            drain(resp)
            conn.close()
            if status == 429 or status == 408 or status >= 500:
                raise Transient(f"{redact(url)}: HTTP {status}", retry_after)
            raise Failed(f"{redact(url)}: HTTP {status}")
        raise Failed(f"more than {MAX_REDIRECTS} redirects from {redact(url)}")


def drain(resp, limit: int = 64 * 1024) -> None:
    try:
        resp.read(limit)
    except (OSError, http.client.HTTPException):
        pass


# --------------------------------------------------------------------------------------
# Retries.

T = TypeVar("T")


def backoff(attempt: int, base: float, retry_after: Optional[float] = None) -> float:
    """Capped exponential backoff with jitter; a server's Retry-After wins when longer."""
    delay = min(MAX_BACKOFF_SECONDS, base * (2 ** (attempt - 1)))
    delay = delay / 2 + random.uniform(0, delay / 2)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


def s3_transient(error: BaseException) -> bool:
    if isinstance(
        error,
        (
            botocore.exceptions.ConnectionError,
            botocore.exceptions.HTTPClientError,
            botocore.exceptions.ReadTimeoutError,
            botocore.exceptions.ConnectTimeoutError,
        ),
    ):
        return True
    if isinstance(error, botocore.exceptions.ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0
        return code in S3_TRANSIENT_CODES or status == 429 or status >= 500
    return False


# --------------------------------------------------------------------------------------
# Progress.


def human_bytes(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


class Progress:
    def __init__(self, total_bytes: int, total_files: int, out=None):
        self.total_bytes = total_bytes
        self.total_files = total_files
        self.bytes_done = 0
        self.files_done = 0
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.out = out or sys.stdout

    def add(self, n: int) -> None:
        with self.lock:
            self.bytes_done += n

    def status(self) -> str:
        with self.lock:
            done, files = self.bytes_done, self.files_done
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = done / elapsed
        left = max(self.total_bytes - done, 0)
        if rate > 0:
            eta_s = int(left / rate)
            eta = f"{eta_s // 3600:d}:{eta_s % 3600 // 60:02d}:{eta_s % 60:02d}"
        else:
            eta = "unknown"
        pct = 100.0 * done / self.total_bytes if self.total_bytes else 100.0
        return (
            f"{human_bytes(done)}/{human_bytes(self.total_bytes)} ({pct:.1f}%), "
            f"files {files}/{self.total_files}, {rate / 1e6:.1f} MB/s, ETA {eta}"
        )

    def say(self, message: str) -> None:
        with self.lock:
            print(message, file=self.out, flush=True)

    def file_done(self, path: str, size: int, hash_name: str) -> None:
        with self.lock:
            self.files_done += 1
        self.say(f"copied {ascii(path)} ({human_bytes(size)}, {hash_name} verified); {self.status()}")

    def undo(self, n: int) -> None:
        with self.lock:
            self.bytes_done -= n

    def ticker(self, every: float, stop: threading.Event) -> threading.Thread:
        def run() -> None:
            while not stop.wait(every):
                self.say(f"progress: {self.status()}")

        thread = threading.Thread(target=run, name="progress", daemon=True)
        thread.start()
        return thread


# --------------------------------------------------------------------------------------
# The stager.


@dataclasses.dataclass
class Options:
    repo: str
    revision: str
    bucket: str
    prefix: str
    region: str
    workers: int
    part_size: int
    hub: str
    token: Optional[str]
    retry_base: float
    progress_seconds: float


class Stager:
    def __init__(self, opts: Options, s3=None, out=None):
        self.o = opts
        self.http = Http(opts.hub, opts.token)
        self.s3 = s3 or boto3.client(
            "s3",
            region_name=opts.region,
            config=botocore.config.Config(
                # Few attempts here: retry() around each call retries longer, and stops when told to.
                retries={"mode": "standard", "max_attempts": 3},
                max_pool_connections=opts.workers * 2 + 4,
                connect_timeout=CONNECT_TIMEOUT,
                read_timeout=READ_TIMEOUT,
            ),
        )
        self.out = out or sys.stdout
        self.stop = threading.Event()
        self.open_uploads: dict = {}  # upload id -> key
        self.uploads_lock = threading.Lock()
        self.downloads: set = set()  # open Hub connections, closed by interrupt()
        self.progress: Optional[Progress] = None

    # ---- logging

    def say(self, message: str) -> None:
        if self.progress is not None:
            self.progress.say(message)
        else:
            print(message, file=self.out, flush=True)

    def warn(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    def interrupt(self) -> None:
        """Stop: the workers stop at their next step, and the downloads they are blocked on
        are cut now."""
        self.stop.set()
        with self.uploads_lock:
            conns = list(self.downloads)
        for conn in conns:
            sock = getattr(conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    # ---- retries

    def sleep(self, seconds: float) -> None:
        if self.stop.wait(seconds):
            raise Stopped("stopping")

    def retry(self, what: str, fn: Callable[[], T]) -> T:
        """Run `fn`, retrying Transient and transient S3 errors with capped backoff."""
        attempt = 0
        while True:
            if self.stop.is_set():
                raise Stopped("stopping")
            attempt += 1
            try:
                return fn()
            except Transient as e:
                error, retry_after = str(e), e.retry_after
            except botocore.exceptions.BotoCoreError as e:
                if not s3_transient(e):
                    raise Failed(f"{what}: {e}") from None
                error, retry_after = str(e), None
            except botocore.exceptions.ClientError as e:
                if not s3_transient(e):
                    raise Failed(f"{what}: {e}") from None
                error, retry_after = str(e), None
            if attempt >= MAX_ATTEMPTS:
                raise Failed(f"{what}: failed after {attempt} attempts: {error}")
            delay = backoff(attempt, self.o.retry_base, retry_after)
            self.warn(f"retrying {what} in {delay:.1f}s (attempt {attempt}/{MAX_ATTEMPTS}): {error}")
            self.sleep(delay)

    # ---- the Hub

    def resolve_url(self, f: HubFile) -> str:
        path = urllib.parse.quote(f.path, safe="/")
        return f"{self.o.hub}/{self.o.repo}/resolve/{self.o.revision}/{path}"

    def list_hub(self) -> list:
        url = f"{self.o.hub}/api/models/{self.o.repo}/tree/{self.o.revision}?recursive=true"
        files: dict = {}
        entries = 0
        pages = 0
        seen_urls = set()
        while url:
            pages += 1
            if pages > MAX_PAGES or url in seen_urls:
                raise BadInput(f"hostile listing: more than {MAX_PAGES} pages, or a page loop at {redact(url)}")
            seen_urls.add(url)
            page_url = url

            def fetch() -> tuple:
                conn, resp, final = self.http.get(page_url, {"Accept": "application/json"})
                try:
                    body = resp.read(MAX_PAGE_BYTES + 1)
                except (OSError, http.client.HTTPException) as e:
                    raise Transient(f"{redact(page_url)}: {type(e).__name__}: {e}") from None
                finally:
                    conn.close()
                return body, resp.getheader("Link"), final

            body, link, final = self.retry(f"listing {redact(page_url)}", fetch)
            if len(body) > MAX_PAGE_BYTES:
                raise BadInput(f"hostile listing: a page larger than {MAX_PAGE_BYTES} bytes at {redact(page_url)}")
            try:
                page = json.loads(body)
            except ValueError:
                raise Failed(f"listing {redact(page_url)}: not JSON") from None
            if not isinstance(page, list):
                raise BadInput(f"hostile listing: {redact(page_url)} is not a JSON array")
            for entry in page:
                entries += 1
                if entries > MAX_ENTRIES:
                    raise BadInput(f"hostile listing: more than {MAX_ENTRIES} entries")
                f = parse_file_entry(entry)
                if f is None:
                    continue
                if f.path in files:
                    raise BadInput(f"hostile listing: path {ascii(f.path)} is listed twice")
                if len((self.o.prefix + f.path).encode("utf-8")) > MAX_KEY_BYTES:
                    raise BadInput(f"hostile listing: path {ascii(f.path)} makes an S3 key longer than {MAX_KEY_BYTES} bytes")
                files[f.path] = f
                if len(files) > MAX_FILES:
                    raise BadInput(f"hostile listing: more than {MAX_FILES} files (at {ascii(f.path)})")
            url = parse_next_link(link, final)
        return sorted(files.values(), key=lambda f: f.path)

    # ---- S3 state

    def list_staged(self, hub_files: list) -> dict:
        """What is under the prefix for the Hub's paths: size, and `hub-oid` for those whose
        size matches (read with HeadObject)."""
        wanted = {f.path: f for f in hub_files}
        sizes: dict = {}
        token = None
        while True:
            kwargs = {"Bucket": self.o.bucket, "Prefix": self.o.prefix}
            if token:
                kwargs["ContinuationToken"] = token
            page = self.retry("listing the staged objects", lambda: self.s3.list_objects_v2(**kwargs))
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(self.o.prefix):]
                if rel in wanted:
                    sizes[rel] = int(obj["Size"])
            if not page.get("IsTruncated"):
                break
            token = page.get("NextContinuationToken")
            if not token:
                break
        candidates = sorted(p for p, size in sizes.items() if size == wanted[p].size)

        def head(path: str) -> tuple:
            key = self.o.prefix + path
            meta = self.retry(f"reading {key}", lambda: self.s3.head_object(Bucket=self.o.bucket, Key=key))
            return path, int(meta.get("ContentLength", sizes[path])), meta.get("Metadata", {}).get("hub-oid")

        staged = {p: StagedObject(size, None) for p, size in sizes.items()}
        if candidates:
            with ThreadPoolExecutor(max_workers=self.o.workers) as pool:
                for path, size, hub_oid in pool.map(head, candidates):
                    staged[path] = StagedObject(size, hub_oid)
        return staged

    # ---- copying one file

    def open_download(self, f: HubFile, offset: int):
        """The file's bytes from `offset` on: (connection, response), checked to start at
        `offset` and to have the expected length when the server says one."""
        headers = {"Range": f"bytes={offset}-"} if offset else {}
        conn, resp, url = self.http.get(self.resolve_url(f), headers)
        try:
            skip = 0
            if offset and resp.status == 206:
                content_range = resp.getheader("Content-Range") or ""
                m = re.match(r"^bytes (\d+)-(\d+)/(\d+|\*)$", content_range.strip())
                if not m or int(m.group(1)) != offset:
                    raise Transient(f"{redact(url)}: unexpected Content-Range {content_range!r} for offset {offset}")
                if m.group(3) != "*" and int(m.group(3)) != f.size:
                    raise Failed(f"{ascii(f.path)}: the Hub serves {m.group(3)} bytes, its listing says {f.size}")
            elif offset:
                skip = offset  # the server ignored Range: read and drop what we have
            length = resp.getheader("Content-Length")
            if length is not None and length.strip().isdigit():
                if int(length) - skip != f.size - offset:
                    raise Failed(
                        f"{ascii(f.path)}: the Hub serves {int(length) - skip + offset} bytes, its listing says {f.size}"
                    )
            while skip:
                chunk = resp.read(min(READ_CHUNK, skip))
                if not chunk:
                    raise Transient(f"{redact(url)}: connection dropped while skipping to {offset}")
                skip -= len(chunk)
            return conn, resp
        except BaseException:
            conn.close()
            raise

    def read_exact(self, resp, n: int, f: HubFile) -> bytearray:
        buf = bytearray()
        while len(buf) < n:
            if self.stop.is_set():
                raise Stopped("stopping")
            try:
                chunk = resp.read(min(READ_CHUNK, n - len(buf)))
            except (OSError, http.client.HTTPException) as e:
                raise Transient(f"{ascii(f.path)}: download dropped: {type(e).__name__}: {e}") from None
            if not chunk:
                raise Transient(f"{ascii(f.path)}: download ended early")
            buf += chunk
        return buf

    def part_size_for(self, size: int) -> int:
        part = self.o.part_size
        if size > part * MAX_PARTS:
            part = -(-size // MAX_PARTS)
            part = -(-part // MIB) * MIB
        return part

    def copy_file(self, f: HubFile) -> None:
        key = self.o.prefix + f.path
        part = self.part_size_for(f.size)
        if f.size <= part:
            self.copy_small(f, key)
        else:
            self.copy_multipart(f, key, part)
        self.progress.file_done(f.path, f.size, f.hash_name)

    def download_with_resume(self, f: HubFile, offset: int, want: int, state: dict) -> bytearray:
        """`want` bytes of `f` from `offset`, reusing the open stream in `state` and
        reopening with a Range from `offset` (all earlier bytes are uploaded and hashed)
        after a drop."""
        attempt = 0
        while True:
            attempt += 1
            try:
                if state.get("resp") is None:
                    state["conn"], state["resp"] = self.open_download(f, offset)
                    with self.uploads_lock:
                        self.downloads.add(state["conn"])
                    if self.stop.is_set():
                        raise Stopped("stopping")
                return self.read_exact(state["resp"], want, f)
            except Transient as e:
                self.close_stream(state)
                if attempt >= MAX_ATTEMPTS:
                    raise Failed(f"{ascii(f.path)}: failed after {attempt} attempts: {e}") from None
                delay = backoff(attempt, self.o.retry_base, e.retry_after)
                again = f"resuming {ascii(f.path)} at byte {offset}" if offset else f"retrying {ascii(f.path)}"
                self.warn(f"{e}; {again} in {delay:.1f}s (attempt {attempt}/{MAX_ATTEMPTS})")
                self.sleep(delay)
            except BaseException:
                self.close_stream(state)
                raise

    def close_stream(self, state: dict) -> None:
        conn = state.get("conn")
        if conn is not None:
            with self.uploads_lock:
                self.downloads.discard(conn)
        close_stream(state)

    def verify(self, f: HubFile, hasher, size: int) -> None:
        if size != f.size:
            raise Failed(f"{ascii(f.path)}: got {size} bytes, the Hub lists {f.size}")
        digest = hasher.hexdigest()
        if digest != f.content_id:
            raise Failed(f"{ascii(f.path)}: {f.hash_name} {digest} does not match the Hub's {f.content_id}")

    def expect_end(self, f: HubFile, state: dict) -> None:
        """After the listed size, the stream must end (no Content-Length: read one more)."""
        resp = state.get("resp")
        if resp is None or resp.getheader("Content-Length") is not None:
            return
        try:
            extra = resp.read(1)
        except (OSError, http.client.HTTPException):
            return
        if extra:
            raise Failed(f"{ascii(f.path)}: the Hub serves more bytes than its listing's {f.size}")

    def copy_small(self, f: HubFile, key: str) -> None:
        state: dict = {}
        try:
            data = bytes(self.download_with_resume(f, 0, f.size, state)) if f.size else b""
            if f.size:
                self.expect_end(f, state)
        finally:
            self.close_stream(state)
        hasher = new_hasher(f)
        hasher.update(data)
        self.verify(f, hasher, len(data))
        sha256 = f.lfs_oid or hashlib.sha256(data).hexdigest()
        self.retry(
            f"uploading {key}",
            lambda: self.s3.put_object(
                Bucket=self.o.bucket,
                Key=key,
                Body=data,
                ContentLength=len(data),
                Metadata={"hub-oid": f.content_id, "sha256": sha256},
            ),
        )
        self.progress.add(len(data))

    def copy_multipart(self, f: HubFile, key: str, part: int) -> None:
        metadata = {"hub-oid": f.content_id}
        if f.lfs_oid:
            metadata["sha256"] = f.lfs_oid
        created = self.retry(
            f"starting the upload of {key}",
            lambda: self.s3.create_multipart_upload(Bucket=self.o.bucket, Key=key, Metadata=metadata),
        )
        upload_id = created["UploadId"]
        with self.uploads_lock:
            self.open_uploads[upload_id] = key
        state: dict = {}
        done = 0
        completed = False
        try:
            hasher = new_hasher(f)
            parts = []
            number = 0
            while done < f.size:
                want = min(part, f.size - done)
                body = bytes(self.download_with_resume(f, done, want, state))
                number += 1
                n = number
                answer = self.retry(
                    f"uploading part {n} of {key}",
                    lambda: self.s3.upload_part(
                        Bucket=self.o.bucket, Key=key, UploadId=upload_id, PartNumber=n, Body=body, ContentLength=len(body)
                    ),
                )
                hasher.update(body)
                parts.append({"PartNumber": n, "ETag": answer["ETag"]})
                done += len(body)
                self.progress.add(len(body))
                del body
            self.expect_end(f, state)
            self.close_stream(state)
            self.verify(f, hasher, done)
            self.retry(
                f"completing the upload of {key}",
                lambda: self.s3.complete_multipart_upload(
                    Bucket=self.o.bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
                ),
            )
            completed = True
        finally:
            self.close_stream(state)
            if not completed:
                self.progress.undo(done)
                self.abort(key, upload_id)
            with self.uploads_lock:
                self.open_uploads.pop(upload_id, None)

    def abort(self, key: str, upload_id: str) -> None:
        for attempt in range(1, 6):
            try:
                self.s3.abort_multipart_upload(Bucket=self.o.bucket, Key=key, UploadId=upload_id)
                self.warn(f"aborted the upload of {ascii(key)}")
                return
            except botocore.exceptions.ClientError as e:
                if e.response.get("Error", {}).get("Code") == "NoSuchUpload":
                    return
                if not s3_transient(e):
                    self.warn(f"cannot abort the upload {upload_id} of {ascii(key)}: {e}")
                    return
                error = e
            except botocore.exceptions.BotoCoreError as e:
                error = e
            time.sleep(min(MAX_BACKOFF_SECONDS, self.o.retry_base * 2**attempt))
        self.warn(f"cannot abort the upload {upload_id} of {ascii(key)}: {error}")

    def abort_all(self) -> None:
        with self.uploads_lock:
            left = list(self.open_uploads.items())
            self.open_uploads.clear()
        for upload_id, key in left:
            self.abort(key, upload_id)

    # ---- the run

    def run(self) -> int:
        started = time.monotonic()
        o = self.o
        self.say(f"staging {o.repo}@{o.revision} into s3://{o.bucket}/{o.prefix}")
        hub_files = self.list_hub()
        total = sum(f.size for f in hub_files)
        self.say(f"the Hub lists {len(hub_files)} files, {human_bytes(total)}")
        staged = self.list_staged(hub_files)
        decided = plan(hub_files, staged)
        to_copy = decided.files_to_copy()
        for d in decided.copy:
            if d.reason != "missing":
                self.say(f"will re-copy {ascii(d.file.path)}: {d.reason}")
        copy_bytes = sum(f.size for f in to_copy)
        self.say(
            f"to copy: {len(to_copy)} files, {human_bytes(copy_bytes)}; "
            f"already staged: {len(decided.skip)} files"
        )
        self.progress = Progress(copy_bytes, len(to_copy), self.out)
        ticker_stop = threading.Event()
        self.progress.ticker(o.progress_seconds, ticker_stop)
        failures = []
        try:
            failures = self.copy_all(to_copy)
        finally:
            ticker_stop.set()
            self.abort_all()
        elapsed = time.monotonic() - started
        copied = len(to_copy) - len(failures)
        copied_bytes = copy_bytes - sum(f.size for f in failures)
        if failures:
            self.say(
                f"FAILED: {len(failures)} files failed ({', '.join(ascii(f.path) for f in failures[:10])}); "
                f"copied {copied} files / {human_bytes(copied_bytes)}, skipped {len(decided.skip)}, "
                f"{elapsed:.0f} seconds; no manifest written"
            )
            return EXIT_FAILED
        key = manifest_key(o.prefix)
        body = manifest_bytes(o.repo, o.revision, o.prefix, hub_files)
        self.retry(
            f"writing {key}",
            lambda: self.s3.put_object(
                Bucket=o.bucket, Key=key, Body=body, ContentType="application/json", ContentLength=len(body)
            ),
        )
        self.say(
            f"done: copied {copied} files / {human_bytes(copied_bytes)}, skipped {len(decided.skip)}, "
            f"{elapsed:.0f} seconds; manifest s3://{o.bucket}/{key}"
        )
        return EXIT_OK

    def copy_all(self, files: list) -> list:
        """Copy `files` with the worker pool; the files that failed."""
        failures = []
        if not files:
            return failures
        pool = ThreadPoolExecutor(max_workers=self.o.workers, thread_name_prefix="copy")
        try:
            pending = {pool.submit(self.copy_file, f): f for f in files}
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    f = pending.pop(future)
                    error = future.exception()
                    if error is None:
                        continue
                    if isinstance(error, Stopped):
                        failures.append(f)
                        continue
                    failures.append(f)
                    self.warn(f"FAILED {ascii(f.path)}: {error}")
        except BaseException:
            # Stopped from outside (a signal): abort every open upload now, cut the downloads;
            # each worker also aborts its own upload as it stops, and the interpreter waits
            # for the workers before it exits.
            self.interrupt()
            self.abort_all()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        return failures


def close_stream(state: dict) -> None:
    conn = state.pop("conn", None)
    state.pop("resp", None)
    if conn is not None:
        try:
            conn.close()
        except OSError:
            pass


# --------------------------------------------------------------------------------------
# Command line.


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str):  # exit 2 with a clear message, as for any bad input
        self.print_usage(sys.stderr)
        raise BadInput(message)


def parse_args(argv: Optional[list]) -> Options:
    p = ArgumentParser(
        prog="stage_weights.py",
        description="Copy a Hugging Face Hub model revision into S3 once, verified.",
    )
    p.add_argument("--repo", required=True, help="ORG/NAME on the Hub")
    p.add_argument("--revision", required=True, help="the commit: 40 lowercase hex digits")
    p.add_argument("--bucket", required=True)
    p.add_argument("--prefix", required=True, help="key prefix, such as ORG/NAME/REVISION/")
    p.add_argument("--region", required=True)
    p.add_argument("--workers", type=int, default=8, help="files copied at once (default 8)")
    p.add_argument("--part-size-mib", type=int, default=64, help="multipart part size (default 64)")
    p.add_argument("--hub-endpoint", default="https://huggingface.co")
    # For tests: fast retries and progress.
    p.add_argument("--retry-base-seconds", type=float, default=1.0, help=argparse.SUPPRESS)
    p.add_argument("--progress-seconds", type=float, default=30.0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if not 1 <= a.workers <= 64:
        raise BadInput(f"--workers {a.workers}: expected 1 to 64")
    if not MIN_PART // MIB <= a.part_size_mib <= MAX_PART // MIB:
        raise BadInput(f"--part-size-mib {a.part_size_mib}: expected 5 to 5120")
    part_size = a.part_size_mib * MIB
    if not (0 <= a.retry_base_seconds <= 60) or not (0.01 <= a.progress_seconds <= 3600):
        raise BadInput("--retry-base-seconds or --progress-seconds out of range")
    return Options(
        repo=check_repo(a.repo),
        revision=check_revision(a.revision),
        bucket=check_bucket(a.bucket),
        prefix=check_prefix(a.prefix),
        region=check_region(a.region),
        workers=a.workers,
        part_size=part_size,
        hub=check_hub(a.hub_endpoint),
        token=check_token(os.environ.get("HF_TOKEN")),
        retry_base=a.retry_base_seconds,
        progress_seconds=a.progress_seconds,
    )


def main(argv: Optional[list] = None) -> int:
    try:
        opts = parse_args(argv)
    except BadInput as e:
        print(f"stage_weights: error: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    stager = Stager(opts)

    def on_signal(signum, _frame):
        stager.interrupt()
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, on_signal)
    try:
        return stager.run()
    except BadInput as e:
        print(f"stage_weights: error: {e}", file=sys.stderr, flush=True)
        return EXIT_BAD_INPUT
    except (Failed, Stopped) as e:
        print(f"stage_weights: FAILED: {e}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except KeyboardInterrupt as e:
        print(f"stage_weights: stopped ({e}); open uploads aborted", file=sys.stderr, flush=True)
        return EXIT_FAILED
    finally:
        stager.stop.set()
        stager.abort_all()


if __name__ == "__main__":
    sys.exit(main())
