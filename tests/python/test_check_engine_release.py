"""Tests of src/constructs/assets/check_engine_release.py, the serving pod's start-up check.

Runs the program as the pod does (`python3 -c <program> <package> <release> <image>`) against
packages installed into a temporary directory: only their metadata, which is all it reads.

Run from the repository root:

    .venv-validators/bin/python -m unittest discover -s tests/python -p 'test_check_engine_release.py' -v
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PROGRAM = (REPO_ROOT / "src" / "constructs" / "assets" / "check_engine_release.py").read_text()
IMAGE = "vllm/vllm-openai:v0.27.0@sha256:" + "0" * 64


def installed(root: Path, name: str, version: str) -> None:
    info = root / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


class CheckEngineRelease(unittest.TestCase):
    def run_check(self, version: str | None, expected: str = "0.27.0"):
        with tempfile.TemporaryDirectory() as tmp:
            if version is not None:
                installed(Path(tmp), "vllm", version)
            env = dict(os.environ, PYTHONPATH=tmp, PYTHONNOUSERSITE="1")
            return subprocess.run(
                [sys.executable, "-B", "-c", PROGRAM, "vllm", expected, IMAGE],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )

    def test_the_release_checked_against_starts(self):
        done = self.run_check("0.27.0")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("vllm 0.27.0", done.stdout)

    def test_a_local_build_suffix_is_not_part_of_the_release(self):
        done = self.run_check("0.27.0+cu130")
        self.assertEqual(done.returncode, 0, done.stderr)

    def test_another_release_stops_the_pod_and_says_why(self):
        done = self.run_check("0.34.0")
        self.assertEqual(done.returncode, 1)
        self.assertIn("runs vllm 0.34.0, not 0.27.0", done.stderr)
        self.assertIn(IMAGE, done.stderr)
        self.assertIn("v0.34.0", done.stderr)

    def test_a_development_build_of_another_release_stops_it(self):
        done = self.run_check("0.27.1.dev3+g1234abc")
        self.assertEqual(done.returncode, 1)
        self.assertIn("0.27.1.dev3+g1234abc", done.stderr)

    def test_an_image_without_the_engine_stops_it(self):
        done = self.run_check(None)
        self.assertEqual(done.returncode, 1)
        self.assertIn("has no vllm installed", done.stderr)

    def test_a_wrong_call_is_a_usage_error(self):
        done = subprocess.run(
            [sys.executable, "-B", "-c", PROGRAM, "vllm"], capture_output=True, text=True, timeout=60
        )
        self.assertEqual(done.returncode, 2)
        self.assertIn("usage", done.stderr)


if __name__ == "__main__":
    unittest.main()
