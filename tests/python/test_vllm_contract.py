"""Tests of codegen/tools/vllm_contract.py, which reads a vLLM release's contract from its source.

On a small package written here in vLLM's shapes (no download): options registered by string,
generated from a configuration dataclass's fields (with `--no-` for a `bool` field, and not for
`bool | str | None` where the release reads that as an optional value), followed through
`add_cli_args` and `super()`, marked `deprecated=True`; and the variables of `vllm/envs.py`.

Run from the repository root:

    .venv-validators/bin/python -m unittest discover -s tests/python -p 'test_vllm_contract.py' -v
"""

from __future__ import annotations

import sys
import unittest
from pathlib import Path

sys.dont_write_bytecode = True

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "codegen" / "tools"))

import vllm_contract as vc  # noqa: E402

ARG_UTILS = '''
import argparse
from dataclasses import dataclass

def _compute_kwargs(cls):
    if type_hints == {bool, str, type(None)}:
        pass

def get_kwargs(cls):
    return {}

@dataclass
class ModelConfig:
    model: str = "m"
    trust_remote_code: bool = False
    max_model_len: int | None = None
    enforce_eager: "bool" = False
    kv_offloading: bool | str | None = None

@dataclass
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        model_kwargs = get_kwargs(ModelConfig)
        group = parser.add_argument_group("ModelConfig")
        group.add_argument("--model", **model_kwargs["model"])
        group.add_argument("--trust-remote-code", **model_kwargs["trust_remote_code"])
        group.add_argument("--max-model-len", "-mml", **model_kwargs["max_model_len"])
        group.add_argument("--enforce-eager", **{**model_kwargs["enforce_eager"], "default": None})
        group.add_argument("--kv-offloading", **model_kwargs["kv_offloading"])
        parser.add_argument("--old-flag", action=argparse.BooleanOptionalAction, deprecated=True)
        return parser

class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        parser = super().add_cli_args(parser)
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
        return parser
'''

CLI_ARGS = '''
from dataclasses import dataclass
from vllm.engine.arg_utils import AsyncEngineArgs, get_kwargs

@dataclass
class BaseFrontendArgs:
    enable_auto_tool_choice: bool = False
    tool_call_parser: str | None = None

    @classmethod
    def add_cli_args(cls, parser):
        frontend_kwargs = get_kwargs(cls)
        frontend_kwargs = cls._customize(frontend_kwargs)
        for key, value in frontend_kwargs.items():
            extra = value.pop("flags", [])
            parser.add_argument(*extra, f"--{key.replace('_', '-')}", **value)
        return parser

@dataclass
class FrontendArgs(BaseFrontendArgs):
    port: int = 8000

def make_arg_parser(parser):
    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--headless", action="store_true")
    parser = FrontendArgs.add_cli_args(parser)
    parser = AsyncEngineArgs.add_cli_args(parser)
    return parser
'''

SERVE = '''
from vllm.entrypoints.openai.cli_args import make_arg_parser

class ServeSubcommand:
    def subparser_init(self, subparsers):
        serve_parser = subparsers.add_parser("serve")
        serve_parser.add_argument("--config")
        return make_arg_parser(serve_parser)
'''

ENVS = '''
environment_variables: dict[str, object] = {
    "VLLM_API_KEY": lambda: None,
    "VLLM_PORT": lambda: None,
}
'''


def package():
    return vc.Package(
        {
            "vllm/engine/arg_utils.py": ARG_UTILS,
            "vllm/entrypoints/openai/cli_args.py": CLI_ARGS,
            "vllm/entrypoints/cli/serve.py": SERVE,
            "vllm/envs.py": ENVS,
        }
    )


class VllmContract(unittest.TestCase):
    def test_the_options_of_vllm_serve_are_read_from_its_parser(self):
        ex, path = vc.serve_options(package())
        self.assertEqual(path, "vllm/entrypoints/openai/cli_args.py")
        self.assertEqual(
            sorted(ex.flags),
            sorted(
                [
                    "--config",
                    "--enable-auto-tool-choice",
                    "--no-enable-auto-tool-choice",
                    "--enable-log-requests",
                    "--no-enable-log-requests",
                    "--enforce-eager",
                    "--no-enforce-eager",
                    "--headless",
                    "--kv-offloading",
                    "--max-model-len",
                    "-mml",
                    "--model",
                    "--old-flag",
                    "--no-old-flag",
                    "--port",
                    "--tool-call-parser",
                    "--trust-remote-code",
                    "--no-trust-remote-code",
                ]
            ),
        )
        self.assertEqual(sorted(ex.deprecated), ["--no-old-flag", "--old-flag"])

    def test_the_variables_are_those_envs_declares(self):
        self.assertEqual(vc.environment(package()), {"VLLM_API_KEY", "VLLM_PORT"})

    def test_type_annotations_are_read_at_their_top_level(self):
        import ast

        def members(text):
            return sorted(vc.union_members(ast.parse(text, mode="eval").body))

        self.assertEqual(members("bool | None"), ["None", "bool"])
        self.assertEqual(members("Optional[bool]"), ["None", "bool"])
        self.assertEqual(members("Union[bool, str]"), ["bool", "str"])
        self.assertEqual(members("dict[str, bool]"), ["dict"])
        self.assertEqual(members("'bool'"), ["bool"])


if __name__ == "__main__":
    unittest.main()
