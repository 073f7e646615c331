"""Tests of src/constructs/assets/drain_instance_group.py, the HyperPod instance group drain.

Unit tests of which pods a drain evicts and of the time format, and end-to-end runs of the
script as a program against a fake Kubernetes API server (an http.server in a thread that
keeps nodes and pods, answers evictions as the Eviction API does, 429 while a
PodDisruptionBudget allows no disruption, and records every call).

Run from the repository root:

    .venv-validators/bin/python -m unittest discover -s tests/python -p 'test_drain_instance_group.py' -v
"""

from __future__ import annotations

import datetime
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.parse
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ beside the script under src/

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "src" / "constructs" / "assets" / "drain_instance_group.py"
sys.path.insert(0, str(SCRIPT.parent))

import drain_instance_group as dig  # noqa: E402

TOKEN = "service-account-token"
GROUP = "p6-b300"


def pod(name, node, namespace="default", owner=None, mirror=False, phase="Running"):
    meta = {"name": name, "namespace": namespace}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner"}]
    if mirror:
        meta["annotations"] = {dig.MIRROR_ANNOTATION: "x"}
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


class FakeCluster:
    """Nodes with labels and pods on them; `guarded` pods refuse eviction `refusals` times."""

    def __init__(self, nodes, pods, guarded=None, refusals=1):
        self.nodes = nodes  # name -> labels
        self.pods = pods
        self.guarded = set(guarded or ())
        self.refusals = {name: refusals for name in self.guarded}
        self.calls = []
        self.lock = threading.Lock()
        self.unschedulable = set()
        self.evicted = []
        self.suspended = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def handler(self):
        cluster = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def handle_any(self, method):
                url = urllib.parse.urlsplit(self.path)
                query = urllib.parse.parse_qs(url.query)
                with cluster.lock:
                    cluster.calls.append(
                        (method, url.path, self.headers.get("Authorization"),
                         self.headers.get("Content-Type"))
                    )
                    if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                        return self.reply(401, {"message": "Unauthorized"})
                    if method == "GET" and url.path == "/api/v1/nodes":
                        key, _, value = query["labelSelector"][0].partition("=")
                        items = [
                            {"metadata": {"name": n, "labels": labels}}
                            for n, labels in sorted(cluster.nodes.items())
                            if labels.get(key) == value
                        ]
                        return self.reply(200, {"items": items})
                    if method == "PATCH" and url.path.startswith("/api/v1/nodes/"):
                        node = urllib.parse.unquote(url.path.rsplit("/", 1)[1])
                        if self.body() != {"spec": {"unschedulable": True}}:
                            return self.reply(400, {"message": "unexpected patch"})
                        cluster.unschedulable.add(node)
                        return self.reply(200, {"metadata": {"name": node}})
                    if method == "PATCH" and url.path.startswith("/apis/batch/v1/namespaces/"):
                        parts = url.path.split("/")
                        if parts[6] != "cronjobs" or self.body() != {"spec": {"suspend": True}}:
                            return self.reply(400, {"message": "unexpected patch"})
                        cluster.suspended.append(f"{parts[5]}/{parts[7]}")
                        return self.reply(200, {})
                    if method == "GET" and url.path == "/api/v1/pods":
                        field = query["fieldSelector"][0]
                        node = field.removeprefix("spec.nodeName=")
                        items = [p for p in cluster.pods if p["spec"]["nodeName"] == node]
                        return self.reply(200, {"items": items})
                    if method == "POST" and url.path.endswith("/eviction"):
                        parts = url.path.split("/")
                        namespace, name = parts[4], parts[6]
                        body = self.body()
                        if body.get("kind") != "Eviction" or body["metadata"] != {
                            "name": name,
                            "namespace": namespace,
                        }:
                            return self.reply(400, {"message": "bad eviction"})
                        if cluster.refusals.get(name, 0) > 0:
                            cluster.refusals[name] -= 1
                            return self.reply(429, {"message": "disruption budget"})
                        before = len(cluster.pods)
                        cluster.pods = [
                            p
                            for p in cluster.pods
                            if (p["metadata"]["namespace"], p["metadata"]["name"])
                            != (namespace, name)
                        ]
                        if len(cluster.pods) == before:
                            return self.reply(404, {"message": "not found"})
                        cluster.evicted.append(f"{namespace}/{name}")
                        return self.reply(201, {})
                    return self.reply(404, {"message": f"no route {method} {url.path}"})

            def do_GET(self):
                self.handle_any("GET")

            def do_PATCH(self):
                self.handle_any("PATCH")

            def do_POST(self):
                self.handle_any("POST")

        return Handler


def stamp(delta: datetime.timedelta) -> str:
    at = datetime.datetime.now(datetime.timezone.utc) + delta
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


class Program(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        Path(self.dir.name, "token").write_text(TOKEN + "\n")

    def tearDown(self):
        self.dir.cleanup()

    def run_drain(self, cluster, drain_at, terminate_at, **extra):
        env = {
            "PATH": os.environ.get("PATH", ""),
            "INSTANCE_GROUP": GROUP,
            "DRAIN_AT": drain_at,
            "TERMINATE_AT": terminate_at,
            "CRON_JOB": "drain-p6-b300",
            "POD_NAME": "drain-p6-b300-1",
            "POD_NAMESPACE": "capacity-drain",
            "KUBERNETES_API": cluster.url,
            "SERVICE_ACCOUNT_DIR": self.dir.name,
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        env.update(extra)
        return subprocess.run(
            [sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
        )

    def cluster(self, **kw):
        nodes = {
            "gpu-1": {dig.GROUP_LABEL: GROUP},
            "gpu-2": {dig.GROUP_LABEL: GROUP},
            "system-1": {dig.GROUP_LABEL: "system"},
        }
        pods = [
            pod("kimik3-0", "gpu-1"),
            pod("kimik3-1", "gpu-2", namespace="serving"),
            pod("dcgm-exporter-x", "gpu-1", namespace="monitoring", owner="DaemonSet"),
            pod("kube-proxy-static", "gpu-2", namespace="kube-system", mirror=True),
            pod("done", "gpu-1", phase="Succeeded"),
            pod("drain-p6-b300-1", "gpu-2", namespace="capacity-drain"),
            pod("coredns-1", "system-1", namespace="kube-system"),
        ]
        c = FakeCluster(nodes, pods, **kw)
        self.addCleanup(c.close)
        return c

    def test_cordons_the_groups_nodes_and_evicts_what_kubectl_drain_would(self):
        c = self.cluster(guarded=["kimik3-0"], refusals=1)
        out = self.run_drain(c, stamp(-datetime.timedelta(minutes=1)), stamp(datetime.timedelta(minutes=10)))
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(c.unschedulable, {"gpu-1", "gpu-2"})
        self.assertEqual(sorted(c.evicted), ["default/kimik3-0", "serving/kimik3-1"])
        remaining = {p["metadata"]["name"] for p in c.pods}
        self.assertEqual(
            remaining, {"dcgm-exporter-x", "kube-proxy-static", "done", "drain-p6-b300-1", "coredns-1"}
        )
        self.assertIn("refused", out.stdout)  # the budget's 429 was retried
        self.assertIn("drained", out.stdout)
        # Nothing fires after the drain: the CronJob is suspended.
        self.assertEqual(c.suspended, ["capacity-drain/drain-p6-b300"])
        patches = [call for call in c.calls if call[0] == "PATCH"]
        self.assertTrue(all(call[3] == "application/merge-patch+json" for call in patches))
        self.assertTrue(all(call[2] == f"Bearer {TOKEN}" for call in c.calls))

    def test_outside_its_window_it_drains_nothing(self):
        c = self.cluster()
        # Long before it: nothing at all.
        out = self.run_drain(c, stamp(datetime.timedelta(hours=2)), stamp(datetime.timedelta(hours=3)))
        self.assertEqual(out.returncode, 0)
        self.assertIn("before the drain window", out.stdout)
        self.assertEqual(c.calls, [])
        # The CronJob firing on the same date a year later drains nothing and suspends itself.
        out = self.run_drain(
            c, stamp(-datetime.timedelta(days=365)), stamp(-datetime.timedelta(days=365) + datetime.timedelta(minutes=1))
        )
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("past the drain window", out.stdout)
        self.assertEqual(c.evicted, [])
        self.assertEqual(c.unschedulable, set())
        self.assertEqual(c.suspended, ["capacity-drain/drain-p6-b300"])

    def test_a_pod_still_running_at_the_terminations_fails_the_job(self):
        c = self.cluster(guarded=["kimik3-1"], refusals=1000)
        out = self.run_drain(c, stamp(-datetime.timedelta(minutes=1)), stamp(datetime.timedelta(seconds=2)))
        self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
        self.assertIn("still running: serving/kimik3-1", out.stdout)
        self.assertIn("default/kimik3-0", c.evicted)
        self.assertEqual(c.suspended, ["capacity-drain/drain-p6-b300"])

    def test_a_group_without_nodes_is_drained_already(self):
        c = self.cluster()
        out = self.run_drain(
            c,
            stamp(-datetime.timedelta(minutes=1)),
            stamp(datetime.timedelta(minutes=10)),
            INSTANCE_GROUP="other",
        )
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("nothing to drain", out.stdout)
        self.assertEqual(c.evicted, [])

    def test_missing_or_malformed_configuration_is_exit_2(self):
        c = self.cluster()
        out = self.run_drain(c, "tomorrow", stamp(datetime.timedelta(minutes=10)))
        self.assertEqual(out.returncode, 2)
        self.assertIn("configuration error", out.stdout)
        self.assertEqual(c.calls, [])

    def test_a_refused_token_fails_with_the_apis_answer(self):
        c = self.cluster()
        Path(self.dir.name, "token").write_text("wrong\n")
        out = self.run_drain(c, stamp(-datetime.timedelta(minutes=1)), stamp(datetime.timedelta(minutes=10)))
        self.assertEqual(out.returncode, 1)
        self.assertIn("HTTP 401", out.stdout)


class Units(unittest.TestCase):
    def test_times_to_the_minute_and_to_the_second(self):
        self.assertEqual(dig.utc("2027-01-15T10:59Z"), dig.utc("2027-01-15T10:59:00Z"))
        self.assertEqual(dig.utc("2027-01-15T10:59Z").tzinfo, datetime.timezone.utc)
        with self.assertRaises(ValueError):
            dig.utc("2027-01-15 10:59")

    def test_which_pods_leave(self):
        own = ("capacity-drain", "me")
        self.assertTrue(dig.must_leave(pod("a", "n"), own))
        self.assertTrue(dig.must_leave(pod("a", "n", owner="ReplicaSet"), own))
        self.assertFalse(dig.must_leave(pod("a", "n", owner="DaemonSet"), own))
        self.assertFalse(dig.must_leave(pod("a", "n", mirror=True), own))
        self.assertFalse(dig.must_leave(pod("a", "n", phase="Failed"), own))
        self.assertFalse(dig.must_leave(pod("me", "n", namespace="capacity-drain"), own))


if __name__ == "__main__":
    unittest.main()
