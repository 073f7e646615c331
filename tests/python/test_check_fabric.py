"""Tests of src/constructs/assets/check_fabric.py, the multi-node group's bandwidth gate.

The arithmetic and the checks of its arguments are tested directly; the whole program runs as
the init container runs it (`python3 -c <program> <GPUs> <threshold> <port>`) against a fake
`torch` whose all-reduce takes a set time, so the processes, the rendezvous arguments, the
slowest rank's verdict and the exit codes are exercised without GPUs.

Run from the repository root:

    .venv-validators/bin/python -m unittest discover -s tests/python -p 'test_check_fabric.py' -v
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SOURCE = REPO_ROOT / "src" / "constructs" / "assets" / "check_fabric.py"
PROGRAM = SOURCE.read_text()

namespace: dict = {"__name__": "check_fabric"}
exec(compile(PROGRAM, str(SOURCE), "exec"), namespace)
bus_bandwidth = namespace["bus_bandwidth"]
layout = namespace["layout"]
verdict = namespace["verdict"]

GROUP = {"LWS_LEADER_ADDRESS": "kimi-k3-0.kimi-k3.kimi-k3", "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}

# A fake torch: each all-reduce of the 1 GiB buffer takes SECONDS (from the environment), so
# the bus bandwidth is known; init_process_group records its arguments in a file per rank.
FAKE_TORCH = textwrap.dedent(
    '''
    import json, os, time

    class _Tensor:
        def __init__(self, value):
            self.value = value
        def item(self):
            return self.value

    def ones(n, dtype=None, device=None):
        return _Tensor(1.0)

    def tensor(values, device=None):
        return _Tensor(values[0])

    float32 = "float32"

    class cuda:
        @staticmethod
        def set_device(i):
            cuda.device = i
        @staticmethod
        def synchronize():
            pass
    '''
)
FAKE_DIST = textwrap.dedent(
    '''
    import json, os, time

    class ReduceOp:
        MIN = "min"

    _rank = None

    def init_process_group(backend, init_method, world_size, rank, timeout):
        global _rank
        _rank = rank
        if os.environ.get("FAKE_FAIL_RANK") == str(rank):
            raise RuntimeError("NCCL error: Failed to initialize any NET plugin")
        out = os.path.join(os.environ["FAKE_OUT"], f"rank{rank}.json")
        with open(out, "w") as f:
            json.dump({"backend": backend, "init_method": init_method, "world_size": world_size,
                       "rank": rank, "timeout": timeout.total_seconds()}, f)

    def all_reduce(t, op=None):
        if op == ReduceOp.MIN:
            t.value = float(os.environ.get("FAKE_MIN_BUSBW", t.value))
            return
        time.sleep(float(os.environ.get("FAKE_SECONDS", "0")))

    def destroy_process_group():
        pass
    '''
)


class Arithmetic(unittest.TestCase):
    def test_bus_bandwidth_follows_nccl_tests(self):
        # 1 GiB in 10 ms over 16 ranks: 107.4 GB/s algorithm bandwidth, x 2 x 15/16.
        self.assertAlmostEqual(bus_bandwidth(1 << 30, 0.01, 16), (1 << 30) / 0.01 * 30 / 16 / 1e9)
        self.assertEqual(bus_bandwidth(1 << 30, 0.01, 1), 0.0)
        self.assertEqual(bus_bandwidth(1 << 30, 0.0, 16), 0.0)

    def test_layout_reads_the_groups_variables(self):
        self.assertEqual(layout(GROUP, 8), ("kimi-k3-0.kimi-k3.kimi-k3", 16, 8))
        self.assertEqual(layout(dict(GROUP, LWS_WORKER_INDEX="0"), 8)[2], 0)
        for broken in (
            {},
            dict(GROUP, LWS_GROUP_SIZE="one"),
            dict(GROUP, LWS_GROUP_SIZE="1"),
            dict(GROUP, LWS_WORKER_INDEX="2"),
            dict(GROUP, LWS_LEADER_ADDRESS=""),
        ):
            with self.assertRaises(ValueError):
                layout(broken, 8)

    def test_the_verdict_names_the_numbers(self):
        self.assertIsNone(verdict(40.0, 40.0))
        message = verdict(3.2, 40.0)
        self.assertIn("3.2 GB/s", message)
        self.assertIn("40.0 GB/s", message)


class Program(unittest.TestCase):
    def run_program(self, args, env_extra, gpus_env=GROUP):
        with tempfile.TemporaryDirectory() as tmp:
            fake = Path(tmp) / "fake"
            (fake / "torch" / "distributed").mkdir(parents=True)
            (fake / "torch" / "__init__.py").write_text(FAKE_TORCH)
            (fake / "torch" / "distributed" / "__init__.py").write_text(FAKE_DIST)
            out = Path(tmp) / "out"
            out.mkdir()
            env = dict(os.environ, PYTHONPATH=str(fake), PYTHONNOUSERSITE="1", FAKE_OUT=str(out))
            env.update(gpus_env)
            env.update(env_extra)
            result = subprocess.run(
                [sys.executable, "-B", "-c", PROGRAM, *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            seen = sorted(p.name for p in out.iterdir())
            first = (out / seen[0]).read_text() if seen else ""
            return result, seen, first

    def test_each_gpu_joins_the_group_at_its_rank(self):
        result, seen, first = self.run_program(["4", "40", "29502"], {"FAKE_MIN_BUSBW": "350.5"})
        self.assertEqual(result.returncode, 0, result.stderr)
        # Worker 1 of 2, 4 GPUs a node: ranks 4 to 7 of 8.
        self.assertEqual(seen, ["rank4.json", "rank5.json", "rank6.json", "rank7.json"])
        self.assertIn('"init_method": "tcp://kimi-k3-0.kimi-k3.kimi-k3:29502"', first)
        self.assertIn('"world_size": 8', first)
        self.assertIn('"backend": "nccl"', first)
        self.assertIn("350.5 GB/s", result.stdout)

    def test_a_slow_fabric_stops_the_pod(self):
        result, _, _ = self.run_program(["2", "40", "29502"], {"FAKE_MIN_BUSBW": "3.1"})
        self.assertEqual(result.returncode, 1)
        self.assertIn("3.1 GB/s, under the 40.0 GB/s", result.stderr)

    def test_nccl_failing_to_start_stops_the_pod_with_its_message(self):
        result, _, _ = self.run_program(["2", "40", "29502"], {"FAKE_FAIL_RANK": "3"})
        self.assertEqual(result.returncode, 1)
        self.assertIn("Failed to initialize any NET plugin", result.stderr)
        self.assertIn("1 of 2 GPU processes failed", result.stderr)

    def test_the_measured_time_gives_the_bandwidth(self):
        # Without a fake minimum the slowest rank's own figure is reported: 1 GiB per 50 ms
        # over 4 ranks is 32.2 GB/s, under a 40 GB/s floor.
        result, _, _ = self.run_program(
            ["2", "40", "29502"], {"FAKE_SECONDS": "0.05"}
        )
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertRegex(result.stderr, r"bus bandwidth across the group is (2\d|3[0-2])\.\d GB/s")

    def test_bad_arguments_and_a_pod_outside_a_group_are_usage_errors(self):
        result, _, _ = self.run_program(["8", "40"], {})
        self.assertEqual(result.returncode, 2)
        result, _, _ = self.run_program(["eight", "40", "29502"], {})
        self.assertEqual(result.returncode, 2)
        result, _, _ = self.run_program(["8", "40", "29502"], {}, gpus_env={})
        self.assertEqual(result.returncode, 2)
        self.assertIn("LeaderWorkerSet", result.stderr)


if __name__ == "__main__":
    unittest.main()
