"""Tests of src/constructs/assets/stage_weights.py, the weights stager.

Unit tests of its pure parts (the plan, validation, Link parsing, which requests carry the
token), and end-to-end runs of the script as a program against a fake Hugging Face Hub (an
http.server in a thread, with a second "CDN" host that refuses any Authorization header)
and moto's S3 server in a thread.

Run from the repository root with the validators' virtualenv (moto installed):

    .venv-validators/bin/python -m unittest discover -s tests/python -p 'test_stage_weights.py' -v
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import http.server
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the script under src/

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "src" / "constructs" / "assets" / "stage_weights.py"
sys.path.insert(0, str(SCRIPT.parent))

import stage_weights as sw  # noqa: E402

REVISION = "0123456789abcdef0123456789abcdef01234567"
MIB = 1024 * 1024
TOKEN = "hf_testtoken_do_not_print_1234567890"
# The interpreter the script runs under in the end-to-end tests: this one, or another (such
# as a Python 3.12 virtualenv made from stage_weights.requirements.txt, the image's).
STAGER_PYTHON = os.environ.get("STAGE_WEIGHTS_PYTHON") or sys.executable


def git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lfs_file(path, size, oid_hex="a" * 64):
    return sw.HubFile(path=path, size=size, oid="b" * 40, lfs_oid=oid_hex)


def git_file(path, size, oid_hex="c" * 40):
    return sw.HubFile(path=path, size=size, oid=oid_hex)


# --------------------------------------------------------------------------------------
# The plan.


class PlanTest(unittest.TestCase):
    def test_empty_store_copies_everything_in_path_order(self):
        files = [git_file("z.json", 3), lfs_file("a.safetensors", 10), git_file("m/x.txt", 1)]
        p = sw.plan(files, {})
        self.assertEqual([d.file.path for d in p.copy], ["a.safetensors", "m/x.txt", "z.json"])
        self.assertEqual({d.reason for d in p.copy}, {"missing"})
        self.assertEqual(p.skip, [])

    def test_all_present_skips_everything(self):
        a, b = lfs_file("a.safetensors", 10, "1" * 64), git_file("b.json", 3, "2" * 40)
        staged = {"a.safetensors": sw.StagedObject(10, "1" * 64), "b.json": sw.StagedObject(3, "2" * 40)}
        p = sw.plan([b, a], staged)
        self.assertEqual(p.copy, [])
        self.assertEqual([d.file for d in p.skip], [a, b])

    def test_size_mismatch_copies(self):
        f = lfs_file("a.safetensors", 10, "1" * 64)
        p = sw.plan([f], {"a.safetensors": sw.StagedObject(9, "1" * 64)})
        self.assertEqual([d.file for d in p.copy], [f])
        self.assertIn("size", p.copy[0].reason)

    def test_oid_mismatch_or_missing_metadata_copies(self):
        f = git_file("b.json", 3, "2" * 40)
        for have in (sw.StagedObject(3, "3" * 40), sw.StagedObject(3, None), sw.StagedObject(3, "")):
            p = sw.plan([f], {"b.json": have})
            self.assertEqual([d.file for d in p.copy], [f], have)
            self.assertEqual(p.skip, [])

    def test_lfs_files_compare_the_sha256_and_others_the_git_oid(self):
        lfs = sw.HubFile("w.safetensors", 5, oid="4" * 40, lfs_oid="5" * 64)
        self.assertEqual(lfs.content_id, "5" * 64)
        # An LFS file's git oid (of its pointer) in the metadata is not enough.
        p = sw.plan([lfs], {"w.safetensors": sw.StagedObject(5, "4" * 40)})
        self.assertEqual(len(p.copy), 1)
        p = sw.plan([lfs], {"w.safetensors": sw.StagedObject(5, "5" * 64)})
        self.assertEqual(len(p.skip), 1)
        plain = sw.HubFile("c.json", 5, oid="6" * 40)
        self.assertEqual(plain.content_id, "6" * 40)
        self.assertEqual(len(sw.plan([plain], {"c.json": sw.StagedObject(5, "6" * 40)}).skip), 1)

    def test_objects_the_hub_does_not_list_are_ignored_and_order_is_by_path(self):
        files = [git_file(p, 1, "7" * 40) for p in ("b", "a/b", "a", "B", "a.b")]
        staged = {"zzz": sw.StagedObject(1, "7" * 40), "a": sw.StagedObject(1, "7" * 40)}
        p = sw.plan(files, staged)
        self.assertEqual([d.file.path for d in p.copy], ["B", "a.b", "a/b", "b"])
        self.assertEqual([d.file.path for d in p.skip], ["a"])
        self.assertEqual(p, sw.plan(list(reversed(files)), staged))

    def test_hashes(self):
        self.assertEqual(sw.git_blob_sha1(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
        h = sw.new_hasher(git_file("x", 6))
        h.update(b"hello\n")
        self.assertEqual(h.hexdigest(), "ce013625030ba8dba906f756967f9e9ca394464a")
        h = sw.new_hasher(lfs_file("x", 6))
        h.update(b"hello\n")
        self.assertEqual(h.hexdigest(), sha256(b"hello\n"))

    def test_manifest_is_deterministic_and_beside_the_prefix(self):
        files = [lfs_file("b.safetensors", 10, "1" * 64), git_file("a.json", 3, "2" * 40)]
        one = sw.manifest_bytes("o/n", REVISION, "o/n/r/", files)
        self.assertEqual(one, sw.manifest_bytes("o/n", REVISION, "o/n/r/", list(reversed(files))))
        doc = json.loads(one)
        self.assertEqual(doc["total_bytes"], 13)
        self.assertEqual(
            doc["files"],
            [
                {"path": "a.json", "size": 3, "git_sha1": "2" * 40, "hub_oid": "2" * 40},
                {"path": "b.safetensors", "size": 10, "sha256": "1" * 64, "hub_oid": "1" * 64},
            ],
        )
        self.assertEqual(sw.manifest_key("o/n/r/"), "o/n/r.manifest.json")


# --------------------------------------------------------------------------------------
# Validation.


GOOD_ARGS = [
    "--repo", "acme/tiny", "--revision", REVISION, "--bucket", "weights-bucket",
    "--prefix", f"acme/tiny/{REVISION}/", "--region", "us-west-2",
]  # fmt: skip


def with_arg(name, value):
    args = list(GOOD_ARGS)
    if name in args:
        args[args.index(name) + 1] = value
    else:
        args += [name, value]
    return args


class ValidationTest(unittest.TestCase):
    def test_hostile_paths_are_refused_by_name(self):
        for path in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "a\nb",
            "a\x00b",
            "a\x7fb",
            "a\x85b",
            "x" * 1025,
            "é" * 513,
            "",
            None,
            7,
        ]:
            with self.assertRaises(sw.BadInput, msg=repr(path)) as caught:
                sw.check_path(path)
            self.assertIn("hostile listing", str(caught.exception))
        for path in ["config.json", "a/b/c.safetensors", ".gitattributes", "a..b", "x" * 1024, "日本/語"]:
            self.assertEqual(sw.check_path(path), path)

    def test_listing_entries(self):
        ok = {"type": "file", "path": "a.bin", "size": 4, "oid": "1" * 40, "lfs": {"oid": "2" * 64, "size": 4}}
        self.assertEqual(sw.parse_file_entry(ok), sw.HubFile("a.bin", 4, "1" * 40, "2" * 64))
        self.assertIsNone(sw.parse_file_entry({"type": "directory", "path": "d", "oid": "1" * 40, "size": 0}))
        bad = [
            dict(ok, path="../a"),
            dict(ok, type="symlink"),
            dict(ok, size=-1),
            dict(ok, size="4"),
            dict(ok, size=True),
            dict(ok, oid="x"),
            dict(ok, lfs={"oid": "nothex", "size": 4}),
            dict(ok, lfs={"oid": "2" * 64, "size": 5}),
            dict(ok, lfs="yes"),
            ["not", "an", "object"],
            {"type": "directory", "path": "/abs"},
        ]
        for entry in bad:
            with self.assertRaises(sw.BadInput, msg=repr(entry)):
                sw.parse_file_entry(entry)

    def test_good_arguments(self):
        o = sw.parse_args(GOOD_ARGS)
        self.assertEqual((o.workers, o.part_size, o.hub), (8, 64 * MIB, "https://huggingface.co"))
        o = sw.parse_args(GOOD_ARGS + ["--workers", "2", "--part-size-mib", "5", "--hub-endpoint", "http://127.0.0.1:8080/"])
        self.assertEqual((o.workers, o.part_size, o.hub), (2, 5 * MIB, "http://127.0.0.1:8080"))

    def test_bad_arguments_are_refused(self):
        cases = [
            ("--repo", "acme"),
            ("--repo", "acme/tiny/extra"),
            ("--repo", "../tiny"),
            ("--repo", "acme/ti ny"),
            ("--revision", "main"),
            ("--revision", REVISION.upper()),
            ("--revision", REVISION[:-1]),
            ("--bucket", "Weights"),
            ("--bucket", "ab"),
            ("--bucket", "a" * 64),
            ("--bucket", "192.168.1.1"),
            ("--bucket", "my..bucket"),
            ("--bucket", "xn--bucket"),
            ("--bucket", "bucket-s3alias"),
            ("--bucket", "-bucket"),
            ("--prefix", "acme/tiny"),
            ("--prefix", "/acme/tiny/"),
            ("--prefix", "acme/../tiny/"),
            ("--prefix", "acme//tiny/"),
            ("--prefix", "acme\\tiny/"),
            ("--prefix", "acme/\ttiny/"),
            ("--region", "mars"),
            ("--region", "US-WEST-2"),
            ("--workers", "0"),
            ("--workers", "many"),
            ("--part-size-mib", "4"),
            ("--part-size-mib", "6000"),
            ("--hub-endpoint", "ftp://huggingface.co"),
            ("--hub-endpoint", "https://user:pw@huggingface.co"),
            ("--hub-endpoint", "https://huggingface.co/api"),
        ]
        with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage lines
            for name, value in cases:
                with self.assertRaises(sw.BadInput, msg=f"{name} {value!r}"):
                    sw.parse_args(with_arg(name, value))
            with self.assertRaises(sw.BadInput):
                sw.parse_args(["--repo", "acme/tiny"])  # the others missing

    def test_bad_arguments_exit_2_with_a_message(self):
        run = subprocess.run(
            [STAGER_PYTHON, str(SCRIPT)] + with_arg("--revision", "main"),
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, HF_TOKEN=TOKEN),
        )
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn("--revision", run.stderr)
        self.assertNotIn(TOKEN, run.stdout + run.stderr)

    def test_token_with_a_newline_is_refused_without_showing_it(self):
        with self.assertRaises(sw.BadInput) as caught:
            sw.check_token("abc\r\nX-Evil: 1")
        self.assertNotIn("abc", str(caught.exception))
        self.assertIsNone(sw.check_token("  "))
        self.assertEqual(sw.check_token(" hf_x \n"), "hf_x")


# --------------------------------------------------------------------------------------
# HTTP details.


class HttpTest(unittest.TestCase):
    def test_link_header(self):
        base = "https://huggingface.co/api/models/o/n/tree/r?recursive=true"
        self.assertIsNone(sw.parse_next_link(None, base))
        self.assertIsNone(sw.parse_next_link("", base))
        self.assertIsNone(sw.parse_next_link('<https://h/a?cursor=1>; rel="prev"', base))
        self.assertEqual(
            sw.parse_next_link('<https://huggingface.co/api/models/o/n/tree/r?recursive=true&cursor=abc>; rel="next"', base),
            "https://huggingface.co/api/models/o/n/tree/r?recursive=true&cursor=abc",
        )
        self.assertEqual(
            sw.parse_next_link('<https://h/p?c=1>; rel="prev", </api/x?cursor=2>; rel=next', base),
            "https://huggingface.co/api/x?cursor=2",
        )
        self.assertEqual(sw.parse_next_link('<https://h/p,q;x>; title="a"; rel="last next"', base), "https://h/p,q;x")

    def test_authorization_only_for_the_hub_origin(self):
        hub = "https://huggingface.co"
        self.assertEqual(
            sw.auth_headers("https://huggingface.co/o/n/resolve/r/x", hub, "t"), {"Authorization": "Bearer t"}
        )
        self.assertEqual(sw.auth_headers("https://HuggingFace.co:443/api/x", hub, "t"), {"Authorization": "Bearer t"})
        for other in [
            "https://cdn-lfs.huggingface.co/x?X-Amz-Signature=s",
            "https://cas-bridge.xethub.hf.co/x",
            "https://huggingface.co:8443/x",
            "http://huggingface.co/x",
            "https://huggingface.co.evil.example/x",
        ]:
            self.assertEqual(sw.auth_headers(other, hub, "t"), {}, other)
        self.assertEqual(sw.auth_headers("https://huggingface.co/x", hub, None), {})

    def test_redirects_keep_the_token_on_the_hub_and_drop_it_for_the_cdn(self):
        hub = FakeHub()
        try:
            hub.add_repo("acme/tiny", tiny_files())
            client = sw.Http(hub.url, TOKEN)
            conn, resp, final = client.get(f"{hub.url}/acme/tiny/resolve/{REVISION}/small.safetensors")
            body = resp.read()
            conn.close()
            self.assertEqual(body, SMALL)
            self.assertTrue(final.startswith(hub.cdn_url), final)
            hub_requests = [r for r in hub.log if r.server == "hub"]
            cdn_requests = [r for r in hub.log if r.server == "cdn"]
            self.assertEqual(len(hub_requests), 2)  # resolve, then the Hub's own second hop
            self.assertTrue(all(r.auth == f"Bearer {TOKEN}" for r in hub_requests))
            self.assertEqual([r.auth for r in cdn_requests], [None])
            self.assertEqual(sw.redact(final), final.split("?")[0])
        finally:
            hub.close()

    def test_retry_after(self):
        self.assertEqual(sw.retry_after_seconds("3"), 3.0)
        self.assertEqual(sw.retry_after_seconds("100000"), sw.MAX_RETRY_AFTER_SECONDS)
        self.assertIsNone(sw.retry_after_seconds("soon"))
        self.assertIsNone(sw.retry_after_seconds(None))
        self.assertEqual(sw.retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT"), 0.0)
        self.assertGreaterEqual(sw.backoff(1, 1.0, retry_after=7.0), 7.0)
        self.assertLessEqual(sw.backoff(30, 1.0), sw.MAX_BACKOFF_SECONDS)


# --------------------------------------------------------------------------------------
# The fake Hub.


class Logged:
    def __init__(self, server, path, auth, range_):
        self.server, self.path, self.auth, self.range = server, path, auth, range_


class FakeFile:
    def __init__(
        self,
        path,
        content,
        lfs=False,
        via_cdn=False,
        drop_at=None,
        listed_oid=None,
        serve=None,
        busy_once=False,
        stall_at=None,
    ):
        self.stall_at = stall_at  # stop sending after this many bytes until released
        self.busy_once = busy_once  # answer 429 with Retry-After once
        self.path = path
        self.content = content
        self.lfs = lfs
        self.via_cdn = via_cdn
        self.drop_at = drop_at  # drop the connection once after this many bytes of the file
        self.served = serve if serve is not None else content  # what is actually served
        self.listed_oid = listed_oid

    def entry(self):
        e = {"type": "file", "path": self.path, "size": len(self.content), "oid": git_oid(self.content)}
        if self.lfs:
            e["oid"] = git_oid(b"version https://git-lfs.github.com/spec/v1\n" + self.path.encode())
            e["lfs"] = {"oid": sha256(self.content), "size": len(self.content), "pointerSize": 130}
        if self.listed_oid:
            e["oid"] = self.listed_oid
        return e


SMALL = random.Random(1).randbytes(1000)
BIG = random.Random(2).randbytes(11 * MIB + 123)


def tiny_files():
    return [
        FakeFile("config.json", b'{"model_type": "tiny"}\n', busy_once=True),
        FakeFile(".gitattributes", b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"),
        FakeFile("tokenizer/tokenizer_config.json", b'{"bos_token": "<s>"}\n'),
        FakeFile("small.safetensors", SMALL, lfs=True, via_cdn=True),
        FakeFile("model-00001-of-00001.safetensors", BIG, lfs=True, via_cdn=True, drop_at=7 * MIB + 17),
    ]


class FakeHub:
    """A Hub (tree API in two pages, resolve with redirects for LFS files) and a CDN host that
    answers 400 to any request with an Authorization header. The CDN is addressed as
    `localhost`, the Hub as `127.0.0.1`."""

    def __init__(self, token=TOKEN):
        self.token = token
        self.repos = {}
        self.blobs = {}
        self.log = []
        self.dropped = set()
        self.stalled = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.hub_server = self._serve("hub")
        self.cdn_server = self._serve("cdn")
        self.url = f"http://127.0.0.1:{self.hub_server.server_address[1]}"
        self.cdn_url = f"http://localhost:{self.cdn_server.server_address[1]}"

    def add_repo(self, repo, files, extra_entries=()):
        self.repos[repo] = (files, list(extra_entries))
        for f in files:
            self.blobs[sha256(f.content) + ":" + repo] = f

    def close(self):
        self.release.set()
        for s in (self.hub_server, self.cdn_server):
            s.shutdown()
            s.server_close()

    def _serve(self, name):
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                with hub.lock:
                    hub.log.append(Logged(name, self.path, self.headers.get("Authorization"), self.headers.get("Range")))
                try:
                    if name == "hub":
                        hub.handle_hub(self)
                    else:
                        hub.handle_cdn(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def handle_hub(self, h):
        url = urllib.parse.urlsplit(h.path)
        query = urllib.parse.parse_qs(url.query)
        if self.token and h.headers.get("Authorization") != f"Bearer {self.token}":
            return self.reply(h, 401, b"no token")
        m = re.match(r"^/api/models/([^/]+/[^/]+)/tree/([0-9a-f]{40})$", url.path)
        if m:
            repo, rev = m.group(1), m.group(2)
            if repo not in self.repos or rev != REVISION or query.get("recursive") != ["true"]:
                return self.reply(h, 404, b"not found")
            files, extra = self.repos[repo]
            entries = [{"type": "directory", "path": "tokenizer", "oid": "d" * 40, "size": 0}]
            entries += [f.entry() for f in files] + extra
            half = (len(entries) + 1) // 2
            if query.get("cursor") == ["page2"]:
                return self.reply(h, 200, json.dumps(entries[half:]).encode(), {"Content-Type": "application/json"})
            link = f'<{self.url}{url.path}?recursive=true&cursor=page2>; rel="next"'
            return self.reply(h, 200, json.dumps(entries[:half]).encode(), {"Content-Type": "application/json", "Link": link})
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([0-9a-f]{40})/(.+)$", url.path)
        if m:
            repo, path = m.group(1), urllib.parse.unquote(m.group(3))
            files = {f.path: f for f in self.repos.get(repo, ([], []))[0]}
            f = files.get(path)
            if f is None or m.group(2) != REVISION:
                return self.reply(h, 404, b"not found")
            with self.lock:
                busy = f.busy_once and (repo, path) not in self.dropped
                if busy:
                    self.dropped.add((repo, path))
            if busy:
                return self.reply(h, 429, b"slow down", {"Retry-After": "0"})
            if f.via_cdn:
                # First a relative redirect on the Hub itself (the token must still go), then
                # the Hub's second hop names the CDN.
                blob = sha256(f.content) + ":" + repo
                return self.reply(h, 302, b"", {"Location": "/hop/" + urllib.parse.quote(blob, safe="")})
            return self.send_file(h, f)
        m = re.match(r"^/hop/(.+)$", url.path)
        if m:
            blob = urllib.parse.unquote(m.group(1))
            location = f"{self.cdn_url}/blobs/{urllib.parse.quote(blob, safe='')}?X-Amz-Signature=sig&Expires=1"
            return self.reply(h, 307, b"", {"Location": location})
        return self.reply(h, 404, b"not found")

    def handle_cdn(self, h):
        if h.headers.get("Authorization") is not None:
            return self.reply(h, 400, b"Only one auth mechanism allowed")
        url = urllib.parse.urlsplit(h.path)
        m = re.match(r"^/blobs/(.+)$", url.path)
        if not m or urllib.parse.parse_qs(url.query).get("X-Amz-Signature") != ["sig"]:
            return self.reply(h, 403, b"bad signature")
        f = self.blobs.get(urllib.parse.unquote(m.group(1)))
        if f is None:
            return self.reply(h, 404, b"no such blob")
        return self.send_file(h, f)

    def send_file(self, h, f):
        data = f.served
        start = 0
        rng = h.headers.get("Range")
        if rng:
            m = re.match(r"^bytes=(\d+)-$", rng)
            if not m or int(m.group(1)) >= len(data):
                return self.reply(h, 416, b"bad range")
            start = int(m.group(1))
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            h.send_response(200)
        h.send_header("Content-Length", str(len(data) - start))
        h.send_header("Content-Type", "application/octet-stream")
        h.end_headers()
        with self.lock:
            drop = f.drop_at is not None and f.path not in self.dropped and start < f.drop_at
            if drop:
                self.dropped.add(f.path)
        if f.stall_at is not None and start < f.stall_at:
            h.wfile.write(data[start : f.stall_at])
            h.wfile.flush()
            self.stalled.set()
            self.release.wait(120)
            h.close_connection = True
            return
        if drop:
            h.wfile.write(data[start : f.drop_at])
            h.wfile.flush()
            h.close_connection = True
            h.connection.shutdown(2)
            return
        h.wfile.write(data[start:])

    @staticmethod
    def reply(h, status, body, headers=None):
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)


# --------------------------------------------------------------------------------------
# End to end: the script as a program, against the fake Hub and moto's S3.


class EndToEndTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import boto3
        from moto.server import ThreadedMotoServer

        # moto's request lines, and its traceback for a part uploaded to an upload just aborted
        logging.disable(logging.ERROR)
        cls.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        cls.moto.start()
        host, port = cls.moto.get_host_and_port()
        cls.endpoint = f"http://{host}:{port}"
        cls.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("AWS_", "HF_")) and k not in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
        }
        cls.env.update(
            AWS_ENDPOINT_URL_S3=cls.endpoint,
            AWS_ACCESS_KEY_ID="testing",
            AWS_SECRET_ACCESS_KEY="testing",
            AWS_DEFAULT_REGION="us-east-1",
            AWS_CONFIG_FILE=os.devnull,
            AWS_SHARED_CREDENTIALS_FILE=os.devnull,
            AWS_EC2_METADATA_DISABLED="true",
            NO_PROXY="*",
            HF_TOKEN=TOKEN,
        )
        cls.s3 = boto3.client(
            "s3",
            endpoint_url=cls.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        cls.hub = FakeHub()
        cls.hub.add_repo("acme/tiny", tiny_files())
        bad_big = bytearray(BIG)
        bad_big[-1] ^= 0xFF  # the last part differs: the upload has parts when it is refused
        cls.hub.add_repo(
            "acme/bad",
            [
                FakeFile("config.json", b'{"model_type": "bad"}\n'),
                FakeFile("model.safetensors", BIG, lfs=True, via_cdn=True, serve=bytes(bad_big)),
                FakeFile("notes.txt", b"the listed oid is of other bytes\n", listed_oid=git_oid(b"other bytes!!\n")),
            ],
        )
        cls.hub.add_repo(
            "acme/hostile",
            [FakeFile("config.json", b"{}\n")],
            extra_entries=[{"type": "file", "path": "../../escape.bin", "size": 1, "oid": "e" * 40}],
        )
        cls.hub.add_repo(
            "acme/stall",
            [
                FakeFile("config.json", b'{"model_type": "stall"}\n'),
                FakeFile("model.safetensors", BIG, lfs=True, via_cdn=True, stall_at=7 * MIB),
            ],
        )
        cls.buckets = 0

    @classmethod
    def tearDownClass(cls):
        logging.disable(logging.NOTSET)
        cls.hub.close()
        cls.moto.stop()

    def new_bucket(self):
        type(self).buckets += 1
        name = f"weights-{type(self).buckets}"
        self.s3.create_bucket(Bucket=name)
        return name

    def command(self, repo, bucket):
        return [
            STAGER_PYTHON, str(SCRIPT), "--repo", repo, "--revision", REVISION, "--bucket", bucket,
            "--prefix", f"{repo}/{REVISION}/", "--region", "us-east-1", "--workers", "3", "--part-size-mib", "5",
            "--hub-endpoint", self.hub.url, "--retry-base-seconds", "0.05", "--progress-seconds", "0.2",
        ]  # fmt: skip

    def stage(self, repo, bucket):
        prefix = f"{repo}/{REVISION}/"
        run = subprocess.run(self.command(repo, bucket), capture_output=True, text=True, timeout=300, env=self.env)
        self.assertNotIn(TOKEN, run.stdout + run.stderr)
        return run, prefix

    def keys(self, bucket):
        return sorted(o["Key"] for o in self.s3.list_objects_v2(Bucket=bucket).get("Contents", []))

    def open_uploads(self, bucket):
        return self.s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])

    def test_copies_verifies_writes_the_manifest_and_is_idempotent(self):
        bucket = self.new_bucket()
        with self.hub.lock:
            self.hub.log.clear()
            self.hub.dropped.clear()
        run, prefix = self.stage("acme/tiny", bucket)
        output = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
        self.assertEqual(run.returncode, 0, output)
        files = tiny_files()
        manifest = prefix.rstrip("/") + ".manifest.json"
        self.assertEqual(self.keys(bucket), sorted([prefix + f.path for f in files] + [manifest]))
        for f in files:
            obj = self.s3.get_object(Bucket=bucket, Key=prefix + f.path)
            self.assertEqual(obj["Body"].read(), f.content, f.path)
            content_id = sha256(f.content) if f.lfs else git_oid(f.content)
            self.assertEqual(obj["Metadata"].get("hub-oid"), content_id, f.path)
            self.assertEqual(obj["Metadata"].get("sha256"), sha256(f.content), f.path)
        self.assertEqual(self.open_uploads(bucket), [])
        # The listing came in two pages; the token went to every Hub request and to no CDN
        # request; the dropped download resumed from the end of the first 5 MiB part.
        log = list(self.hub.log)
        self.assertEqual(sum(1 for r in log if "/tree/" in r.path), 2)
        self.assertTrue(all(r.auth == f"Bearer {TOKEN}" for r in log if r.server == "hub"))
        self.assertTrue([r for r in log if r.server == "cdn"])
        self.assertTrue(all(r.auth is None for r in log if r.server == "cdn"))
        self.assertIn(f"bytes={5 * MIB}-", [r.range for r in log if r.server == "cdn"], output)
        self.assertIn("resuming", run.stderr)
        self.assertRegex(run.stderr, r"config\.json: HTTP 429; retrying 'config\.json'")
        self.assertRegex(run.stdout, r"files 5/5, [0-9.]+ MB/s, ETA")
        self.assertRegex(run.stdout, r"done: copied 5 files / 0\.01 GB, skipped 0, \d+ seconds")
        # The manifest.
        first = self.s3.get_object(Bucket=bucket, Key=manifest)["Body"].read()
        doc = json.loads(first)
        self.assertEqual(
            (doc["repo"], doc["revision"], doc["prefix"]), ("acme/tiny", REVISION, prefix)
        )
        self.assertEqual(doc["total_bytes"], sum(len(f.content) for f in files))
        self.assertEqual([e["path"] for e in doc["files"]], sorted(f.path for f in files))
        for e in doc["files"]:
            f = next(f for f in files if f.path == e["path"])
            self.assertEqual(e["size"], len(f.content))
            if f.lfs:
                self.assertEqual((e["sha256"], e["hub_oid"]), (sha256(f.content), sha256(f.content)))
                self.assertNotIn("git_sha1", e)
            else:
                self.assertEqual((e["git_sha1"], e["hub_oid"]), (git_oid(f.content), git_oid(f.content)))
                self.assertNotIn("sha256", e)
        # Again: nothing copied, the same manifest bytes.
        with self.hub.lock:
            self.hub.log.clear()
        again, _ = self.stage("acme/tiny", bucket)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertRegex(again.stdout, r"done: copied 0 files / 0\.00 GB, skipped 5,")
        self.assertEqual([r.path for r in self.hub.log if "/resolve/" in r.path], [])
        self.assertEqual(self.s3.get_object(Bucket=bucket, Key=manifest)["Body"].read(), first)

    def test_a_corrupt_object_is_copied_again(self):
        bucket = self.new_bucket()
        run, prefix = self.stage("acme/tiny", bucket)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        good = b'{"model_type": "tiny"}\n'
        bad = b"X" * len(good)
        self.s3.put_object(Bucket=bucket, Key=prefix + "config.json", Body=bad, Metadata={"hub-oid": "0" * 40})
        self.s3.put_object(Bucket=bucket, Key=prefix + "small.safetensors", Body=SMALL)  # no metadata
        again, _ = self.stage("acme/tiny", bucket)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertRegex(again.stdout, r"done: copied 2 files / 0\.00 GB, skipped 3,")
        self.assertIn("config.json", again.stdout)
        self.assertEqual(self.s3.get_object(Bucket=bucket, Key=prefix + "config.json")["Body"].read(), good)
        head = self.s3.head_object(Bucket=bucket, Key=prefix + "small.safetensors")
        self.assertEqual(head["Metadata"].get("hub-oid"), sha256(SMALL))

    def test_bytes_that_do_not_match_the_hub_fail_and_leave_nothing(self):
        bucket = self.new_bucket()
        run, prefix = self.stage("acme/bad", bucket)
        output = f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"
        self.assertEqual(run.returncode, 1, output)
        self.assertIn("model.safetensors", run.stderr)
        self.assertIn("notes.txt", run.stderr)
        self.assertEqual(self.keys(bucket), [prefix + "config.json"], output)
        self.assertEqual(self.open_uploads(bucket), [], output)
        self.assertIn("aborted the upload", run.stderr)
        self.assertIn("no manifest written", run.stdout)

    def test_sigterm_aborts_the_open_upload(self):
        bucket = self.new_bucket()
        prefix = f"acme/stall/{REVISION}/"
        self.hub.stalled.clear()
        self.hub.release.clear()
        proc = subprocess.Popen(
            self.command("acme/stall", bucket), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=self.env
        )
        try:
            self.assertTrue(self.hub.stalled.wait(60), "the download never reached the stall")
            deadline = time.monotonic() + 30
            while not self.open_uploads(bucket) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertTrue(self.open_uploads(bucket), "no multipart upload was started")
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            self.hub.release.set()
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        output = f"stdout:\n{out}\nstderr:\n{err}"
        self.assertEqual(proc.returncode, 1, output)
        self.assertIn("stopped", err)
        self.assertNotIn(TOKEN, out + err)
        self.assertEqual(self.open_uploads(bucket), [], output)
        self.assertNotIn(prefix + "model.safetensors", self.keys(bucket))
        self.assertNotIn(prefix.rstrip("/") + ".manifest.json", self.keys(bucket))

    def test_a_hostile_listing_exits_2_and_writes_nothing(self):
        bucket = self.new_bucket()
        run, _ = self.stage("acme/hostile", bucket)
        self.assertEqual(run.returncode, 2, run.stdout + run.stderr)
        self.assertIn("../../escape.bin", run.stderr)
        self.assertEqual(self.keys(bucket), [])


if __name__ == "__main__":
    unittest.main()
