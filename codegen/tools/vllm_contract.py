#!/usr/bin/env python3
"""Extracts one vLLM release's serving contract from its source distribution on PyPI.

    python3 codegen/tools/vllm_contract.py 0.27.0 [0.34.0 ...]

For each version: downloads `vllm-<version>.tar.gz` from PyPI, checks it against the sha256
PyPI's index lists, and reads (never runs) its Python sources:

- the options `vllm serve` accepts: the parser `vllm/entrypoints/cli/serve.py` builds through
  `make_arg_parser`, followed into every `add_cli_args` it calls; an option generated from a
  configuration dataclass's field is that field's name with `-` for `_`, and a field whose type
  is `bool` gets argparse's `--no-` form too (`BooleanOptionalAction`), as `get_kwargs` does;
- the options marked `deprecated=True`;
- the `VLLM_` environment variables the release reads (`environment_variables` in
  `vllm/envs.py`; vLLM warns of any other `VLLM_` variable and ignores it).

Writes `codegen/schemas/engines/vllm/<version>.txt`; `cargo run -p hyperforge-codegen` then
turns every such file into `src/catalog/engine_releases.rs`. Standard library only.
"""

import ast
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from pathlib import Path

INDEX = "https://pypi.org/simple/vllm/"
OUT = Path(__file__).resolve().parent.parent / "schemas" / "engines" / "vllm"


def download(version):
    req = urllib.request.Request(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        index = json.load(r)
    name = f"vllm-{version}.tar.gz"
    entry = next((f for f in index["files"] if f["filename"] == name), None)
    if entry is None:
        sys.exit(f"PyPI lists no {name}")
    with urllib.request.urlopen(entry["url"], timeout=600) as r:
        data = r.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["hashes"]["sha256"]:
        sys.exit(f"{name}: sha256 {digest} is not the index's {entry['hashes']['sha256']}")
    return name, digest, data


def sources(data):
    """Every `vllm/**/*.py` of the archive, by path inside the package (`vllm/envs.py`)."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith("vllm/") and parts[1].endswith(".py"):
                f = tar.extractfile(member)
                if f is not None:
                    out[parts[1]] = f.read().decode("utf-8")
    return out


class Package:
    """The package's classes and module-level functions, parsed."""

    def __init__(self, files):
        self.files = files
        self.trees = {}
        self.classes = {}
        for path, text in sorted(files.items()):
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            self.trees[path] = tree
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, (path, node))

    def function(self, path, name):
        for node in self.trees[path].body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
        return None

    def method(self, cls, name):
        """`cls.name`, looked up through the class's bases."""
        seen = set()
        while cls and cls not in seen:
            seen.add(cls)
            found = self.classes.get(cls)
            if not found:
                return None, None
            _, node = found
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return cls, item
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            cls = bases[0] if bases else None
        return None, None

    def fields(self, cls):
        """A dataclass's fields with their annotations, bases' first."""
        found = self.classes.get(cls)
        if not found:
            return {}
        _, node = found
        out = {}
        for base in node.bases:
            if isinstance(base, ast.Name):
                out.update(self.fields(base.id))
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                if "ClassVar" in ast.unparse(item.annotation):
                    continue
                out[item.target.id] = item.annotation
        return out


def union_members(annotation):
    """The top-level members of a type annotation (`bool | None` -> bool, None)."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return union_members(annotation.left) + union_members(annotation.right)
    if isinstance(annotation, ast.Subscript):
        head = ast.unparse(annotation.value)
        if head in ("Optional", "typing.Optional"):
            return union_members(annotation.slice) + ["None"]
        if head in ("Union", "typing.Union"):
            elts = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
            return [m for e in elts for m in union_members(e)]
        if head in ("Annotated", "typing.Annotated") and isinstance(annotation.slice, ast.Tuple):
            return union_members(annotation.slice.elts[0])
        return [head]
    if isinstance(annotation, ast.Constant):
        if annotation.value is None:
            return ["None"]
        if isinstance(annotation.value, str):
            try:
                return union_members(ast.parse(annotation.value, mode="eval").body)
            except SyntaxError:
                return [annotation.value]
    return [ast.unparse(annotation)]


class Extractor:
    def __init__(self, package):
        self.p = package
        self.flags = set()
        self.deprecated = set()
        arg_utils = package.files.get("vllm/engine/arg_utils.py", "")
        # Newer releases read `bool | str | None` as an option with an optional value.
        self.optional_valued = "type_hints == {bool, str, type(None)}" in arg_utils

    def is_bool(self, cls, field):
        annotation = self.p.fields(cls).get(field)
        if annotation is None:
            return False
        members = set(union_members(annotation))
        if "bool" not in members:
            return False
        return not (self.optional_valued and members == {"bool", "str", "None"})

    def add(self, names, boolean, deprecated):
        for name in names:
            self.flags.add(name)
            if deprecated:
                self.deprecated.add(name)
            if boolean and name.startswith("--"):
                self.flags.add("--no-" + name[2:])
                if deprecated:
                    self.deprecated.add("--no-" + name[2:])

    def walk(self, fn, self_cls, stack=()):
        """Every option `fn` (a method of `self_cls`, or a function) registers."""
        key = (self_cls, fn.name, fn.lineno)
        if key in stack:
            return
        stack = stack + (key,)
        kwargs_of = {}  # variable -> dataclass (`x = get_kwargs(C)`)
        field_of = {}  # variable -> (dataclass, field) (`x = kw["f"]`)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
                if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("get_kwargs") and value.args:
                    cls = ast.unparse(value.args[0])
                    kwargs_of[target] = self_cls if cls == "cls" else cls
                elif isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name) and value.args[0].id in kwargs_of:
                    kwargs_of[target] = kwargs_of[value.args[0].id]  # `cls._customize_cli_kwargs(kw)`
                else:
                    sub = value
                    if isinstance(sub, ast.Call) and sub.args:
                        sub = sub.args[0]  # `dict(kw["f"])`, `copy(kw["f"])`
                    if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name) and sub.value.id in kwargs_of and isinstance(sub.slice, ast.Constant):
                        field_of[target] = (kwargs_of[sub.value.id], sub.slice.value)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            if node.func.attr == "add_argument":
                self.argument(node, fn, kwargs_of, field_of)
            elif node.func.attr == "add_cli_args":
                owner = node.func.value
                if isinstance(owner, ast.Name):
                    cls = owner.id
                elif isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super":
                    cls = self.base_of(self_cls)
                else:
                    continue
                found_cls, method = self.p.method(cls, "add_cli_args")
                if method is not None:
                    self.walk(method, cls, stack)

    def base_of(self, cls):
        found = self.p.classes.get(cls)
        if not found:
            return None
        bases = [b.id for b in found[1].bases if isinstance(b, ast.Name)]
        return bases[0] if bases else None

    def argument(self, call, fn, kwargs_of, field_of):
        names = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        deprecated = isinstance(keywords.get("deprecated"), ast.Constant) and keywords["deprecated"].value is True
        action = ast.unparse(keywords["action"]) if "action" in keywords else ""
        boolean = action.endswith("BooleanOptionalAction")
        for k in call.keywords:
            if k.arg is not None:
                continue
            source = k.value
            if isinstance(source, ast.Dict):  # `{**kw["f"], "default": None}`
                source = next((v for key, v in zip(source.keys, source.values) if key is None), None)
            if isinstance(source, ast.Subscript) and isinstance(source.value, ast.Name) and source.value.id in kwargs_of and isinstance(source.slice, ast.Constant):
                boolean = boolean or self.is_bool(kwargs_of[source.value.id], source.slice.value)
            elif isinstance(source, ast.Name) and source.id in field_of:
                boolean = boolean or self.is_bool(*field_of[source.id])
        generated = [a for a in call.args if isinstance(a, ast.JoinedStr)]
        if generated:
            # `for key, value in kw.items(): add_argument(f"--{key.replace('_', '-')}", **value)`
            loop = next(
                (n for n in ast.walk(fn) if isinstance(n, ast.For) and any(c is call for c in ast.walk(n))),
                None,
            )
            iterated = loop and isinstance(loop.iter, ast.Call) and isinstance(loop.iter.func, ast.Attribute) and isinstance(loop.iter.func.value, ast.Name) and loop.iter.func.value.id
            cls = kwargs_of.get(iterated) if iterated else None
            if cls is None:
                sys.exit(f"an option generated at line {call.lineno} iterates over something unknown")
            for field in self.p.fields(cls):
                self.add([f"--{field.replace('_', '-')}"], self.is_bool(cls, field), False)
            return
        self.add([n for n in names if n.startswith("-")], boolean, deprecated)


def serve_options(package):
    """The options of `vllm serve`: its parser is `make_arg_parser`, imported by the CLI."""
    serve = package.trees.get("vllm/entrypoints/cli/serve.py")
    if serve is None:
        sys.exit("no vllm/entrypoints/cli/serve.py")
    module = None
    for node in ast.walk(serve):
        if isinstance(node, ast.ImportFrom) and any(a.name == "make_arg_parser" for a in node.names):
            module = node.module
    if module is None:
        sys.exit("serve.py imports no make_arg_parser")
    path = module.replace(".", "/") + ".py"
    fn = package.function(path, "make_arg_parser")
    if fn is None:
        sys.exit(f"no make_arg_parser in {path}")
    ex = Extractor(package)
    ex.walk(fn, None)
    # Options the serve subcommand adds itself.
    for node in ast.walk(serve):
        if isinstance(node, ast.FunctionDef) and node.name == "subparser_init":
            ex.walk(node, None)
    return ex, path


def environment(package):
    tree = package.trees.get("vllm/envs.py")
    names = set()
    for node in tree.body if tree else []:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "environment_variables" and isinstance(node.value, ast.Dict):
            names |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    if not names:
        sys.exit("vllm/envs.py declares no environment_variables")
    return names


def main(versions):
    if not versions:
        sys.exit(__doc__)
    OUT.mkdir(parents=True, exist_ok=True)
    for version in versions:
        name, digest, data = download(version)
        package = Package(sources(data))
        ex, parser_path = serve_options(package)
        env = environment(package)
        lines = [
            f"# vLLM {version}: the options `vllm serve` accepts and the VLLM_ variables it reads.",
            f"# source: PyPI {name}, sha256 {digest}",
            f"# read: vllm/entrypoints/cli/serve.py, {parser_path} (make_arg_parser) and the add_cli_args it calls, vllm/envs.py",
            f"# regenerate: python3 codegen/tools/vllm_contract.py {version}",
        ]
        lines += [f"flag {f}" for f in sorted(ex.flags)]
        lines += [f"deprecated {f}" for f in sorted(ex.deprecated)]
        lines += [f"env {e}" for e in sorted(env)]
        (OUT / f"{version}.txt").write_text("\n".join(lines) + "\n")
        print(f"vLLM {version}: {len(ex.flags)} options ({len(ex.deprecated)} deprecated), {len(env)} variables")


if __name__ == "__main__":
    main(sys.argv[1:])
