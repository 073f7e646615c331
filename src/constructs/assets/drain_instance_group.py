"""Drains one SageMaker HyperPod instance group before its training plan ends.

Run by a CronJob at the plan's drain time: cordons every node of the group (label
`hyperforge.io/instance-group`, set in the group's KubernetesConfig) and evicts their pods
through the Eviction API, as `kubectl drain` does (DaemonSet and mirror pods stay;
PodDisruptionBudgets are honoured, a blocked eviction is retried), so every server finishes its
requests within its termination grace before SageMaker begins terminating the plan's
instances. HyperPod itself drains nothing when it terminates them.

Once it has run (or finds its window past), it suspends its own CronJob (CRON_JOB), whose
schedule has no year: nothing fires after the drain. Applying the stage again resumes it.

Standard library only (the image is the plain Python image). Configured by environment:
INSTANCE_GROUP; DRAIN_AT and TERMINATE_AT (RFC 3339 in UTC, `2027-01-15T10:59Z`); CRON_JOB;
POD_NAME and POD_NAMESPACE (its own pod, never evicted). The API server and the service
account's token and CA are the in-cluster ones (KUBERNETES_API, SERVICE_ACCOUNT_DIR override
them).

Exit status: 0 drained (or nothing to do outside the window), 1 pods still running when the
terminations begin, 2 a configuration error.
"""

from __future__ import annotations

import datetime
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

GROUP_LABEL = "hyperforge.io/instance-group"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# A CronJob that fires this long before the drain time (the pod's start-up) still drains.
EARLIEST_START = datetime.timedelta(minutes=15)
RETRY_SECONDS = 5


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def utc(text: str) -> datetime.datetime:
    """An RFC 3339 time in UTC, to the minute or the second (`2027-01-15T10:59Z`)."""
    shape = "%Y-%m-%dT%H:%MZ" if len(text) == 17 else "%Y-%m-%dT%H:%M:%SZ"
    value = datetime.datetime.strptime(text, shape)
    return value.replace(tzinfo=datetime.timezone.utc)


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


class Api:
    """The few Kubernetes API calls a drain makes."""

    def __init__(self, base: str, account_dir: str):
        self.base = base.rstrip("/")
        with open(os.path.join(account_dir, "token"), encoding="utf-8") as f:
            self.token = f.read().strip()
        self.context = None
        if self.base.startswith("https://"):
            self.context = ssl.create_default_context(cafile=os.path.join(account_dir, "ca.crt"))

    def call(self, method: str, path: str, body=None, content_type="application/json"):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=30) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            raise ApiError(e.code, detail) from None

    def nodes(self, group: str) -> list[str]:
        selector = urllib.parse.quote(f"{GROUP_LABEL}={group}")
        items = self.call("GET", f"/api/v1/nodes?labelSelector={selector}").get("items", [])
        return sorted(n["metadata"]["name"] for n in items)

    def cordon(self, node: str) -> None:
        self.call(
            "PATCH",
            f"/api/v1/nodes/{urllib.parse.quote(node)}",
            {"spec": {"unschedulable": True}},
            "application/merge-patch+json",
        )

    def pods_on(self, node: str) -> list[dict]:
        selector = urllib.parse.quote(f"spec.nodeName={node}")
        return self.call("GET", f"/api/v1/pods?fieldSelector={selector}").get("items", [])

    def suspend(self, namespace: str, cron_job: str) -> None:
        ns, name = urllib.parse.quote(namespace), urllib.parse.quote(cron_job)
        self.call(
            "PATCH",
            f"/apis/batch/v1/namespaces/{ns}/cronjobs/{name}",
            {"spec": {"suspend": True}},
            "application/merge-patch+json",
        )

    def evict(self, namespace: str, name: str) -> None:
        ns, pod = urllib.parse.quote(namespace), urllib.parse.quote(name)
        self.call(
            "POST",
            f"/api/v1/namespaces/{ns}/pods/{pod}/eviction",
            {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace},
            },
        )


def must_leave(pod: dict, own: tuple[str, str]) -> bool:
    """Whether a drain evicts `pod`: not a DaemonSet's or a mirror pod, not finished, not us."""
    meta = pod.get("metadata", {})
    if (meta.get("namespace"), meta.get("name")) == own:
        return False
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return False
    if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or []):
        return False
    return pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")


def drain(api: Api, group: str, own: tuple[str, str], deadline: datetime.datetime, log) -> int:
    nodes = api.nodes(group)
    if not nodes:
        log(f"no node of instance group {group}: nothing to drain")
        return 0
    for node in nodes:
        api.cordon(node)
        log(f"cordoned {node}")
    while True:
        remaining = []
        for node in nodes:
            for pod in api.pods_on(node):
                if not must_leave(pod, own):
                    continue
                meta = pod["metadata"]
                key = (meta["namespace"], meta["name"])
                remaining.append(f"{key[0]}/{key[1]}")
                if meta.get("deletionTimestamp"):
                    continue  # terminating: its grace runs
                try:
                    api.evict(*key)
                    log(f"evicted {key[0]}/{key[1]} from {node}")
                except ApiError as e:
                    if e.status == 404:
                        continue
                    # 429: a PodDisruptionBudget allows no disruption now; retried.
                    log(f"eviction of {key[0]}/{key[1]} refused ({e}); retrying")
        if not remaining:
            log(f"instance group {group} drained: {len(nodes)} node(s) cordoned, no pod left")
            return 0
        if now() >= deadline:
            log(
                "SageMaker begins terminating the plan's instances now; still running: "
                + ", ".join(sorted(set(remaining)))
            )
            return 1
        time.sleep(RETRY_SECONDS)


def main() -> int:
    log = lambda message: print(message, flush=True)  # noqa: E731
    try:
        group = os.environ["INSTANCE_GROUP"]
        drain_at = utc(os.environ["DRAIN_AT"])
        terminate_at = utc(os.environ["TERMINATE_AT"])
        own = (os.environ.get("POD_NAMESPACE", ""), os.environ.get("POD_NAME", ""))
    except (KeyError, ValueError) as e:
        log(f"configuration error: {e}")
        return 2
    current = now()
    # The CronJob fires every year on the drain's date; only the plan's own year drains.
    if current < drain_at - EARLIEST_START:
        log(f"{current:%Y-%m-%dT%H:%M:%SZ} is before the drain window: nothing to do")
        return 0
    api = Api(
        os.environ.get("KUBERNETES_API", "https://kubernetes.default.svc"),
        os.environ.get("SERVICE_ACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount"),
    )
    if current >= terminate_at:
        log(f"{current:%Y-%m-%dT%H:%M:%SZ} is past the drain window: nothing to do")
        status = 0
    else:
        if current < drain_at:
            time.sleep((drain_at - current).total_seconds())
        try:
            status = drain(api, group, own, terminate_at, log)
        except (ApiError, OSError) as e:
            log(f"the drain failed: {e}")
            status = 1
    cron_job = os.environ.get("CRON_JOB")
    if cron_job and own[0]:
        try:
            api.suspend(own[0], cron_job)
            log(f"suspended CronJob {own[0]}/{cron_job}: nothing fires after the drain")
        except (ApiError, OSError) as e:
            log(f"could not suspend CronJob {own[0]}/{cron_job}: {e}")
    return status


if __name__ == "__main__":
    sys.exit(main())
