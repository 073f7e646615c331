#!/usr/bin/env python3
"""Validate custom resources against their vendored CRD.

    validate_crd.py --crd codegen/schemas/crds/inference.sagemaker.aws.amazon.com_inferenceendpointconfigs.yaml FILE...
    validate_crd.py --crd codegen/schemas/crds/karpenter.sh_nodepools.yaml FILE...
    validate_crd.py --crd codegen/schemas/crds/keda.sh_scaledobjects.yaml --version v1alpha1 FILE...
    validate_crd.py --crd codegen/schemas/crds/keda.sh_triggerauthentications.yaml --version v1alpha1 FILE...

The CRD names the kind and group checked (InferenceEndpointConfig, NodePool, EC2NodeClass,
ScaledObject, TriggerAuthentication, ...). Every document of that kind in the given YAML files (multi-document files are fine;
other kinds are ignored) is checked against the openAPIV3Schema of the CRD's version
`--version` (default v1), converted to JSON Schema draft 4 the way the API server would
apply it with strict field validation:

* `nullable: true` adds "null" to the allowed types;
* `x-kubernetes-int-or-string` becomes anyOf [integer, string];
* every object schema with `properties` gets `additionalProperties: false` unless it has
  `x-kubernetes-preserve-unknown-fields` (unknown fields are errors, as with
  `kubectl apply --validate=strict`);
* the other `x-kubernetes-*` extensions are dropped, including the CEL rules of
  `x-kubernetes-validations`, which are not evaluated;
* the root `metadata` schema becomes {"type": "object"} (the API server validates it);
  `metadata.name` (or `generateName`) must still be a non-empty string.

`apiVersion` must be the CRD's group and the version checked (e.g.
inference.sagemaker.aws.amazon.com/v1) and `kind` exactly the CRD's kind.

Exit status: 0 when every document is valid; 1 on any validation or parse error (all
errors are printed, with file, document and instance path); 2 when a file cannot be read
or holds no document of the CRD's kind at all (so a wrong input cannot pass silently) and
there was no validation error.
"""

import argparse
import copy
import re
import sys

import jsonschema
import yaml

# Keys whose values are schemas, maps of schemas, or lists of schemas. Everything else
# (enum, default, example, description, pattern, ...) is data and is copied verbatim.
_SCHEMA_KEYS = ("items", "additionalProperties", "not")
_SCHEMA_LIST_KEYS = ("allOf", "anyOf", "oneOf")
_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "definitions")

_HELM_EXPR = re.compile(r"\{\{.*?\}\}")

try:  # the C loader makes the 450 KB CRD load several times faster
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader


def convert(node):
    """Return a draft-4 JSON Schema equivalent of a structural OpenAPI v3 schema node."""
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key == "nullable":
            continue
        if key in _SCHEMA_KEYS:
            if isinstance(value, list):  # draft-4 tuple items
                out[key] = [convert(v) for v in value]
            else:
                out[key] = convert(value)  # booleans pass through
        elif key in _SCHEMA_LIST_KEYS:
            out[key] = [convert(v) for v in value]
        elif key in _SCHEMA_MAP_KEYS:
            out[key] = {name: convert(sub) for name, sub in value.items()}
        else:
            out[key] = copy.deepcopy(value)

    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        if "anyOf" not in out:
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]

    if node.get("nullable"):
        if "type" in out:
            types = out["type"] if isinstance(out["type"], list) else [out["type"]]
            if "null" not in types:
                out["type"] = types + ["null"]
        if "anyOf" in out and node.get("x-kubernetes-int-or-string"):
            out["anyOf"] = out["anyOf"] + [{"type": "null"}]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = out["enum"] + [None]

    if (
        "properties" in out
        and "additionalProperties" not in out
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


class Target:
    """The kind a CRD defines, with the schema of the version checked."""

    def __init__(self, kind, api_version, schema):
        self.kind = kind
        self.api_version = api_version
        self.schema = schema


def load_schema(crd_path, schema_version):
    with open(crd_path, encoding="utf-8") as fh:
        # Some vendored files come from a Helm chart: template expressions such as
        # '{{ .Values.shortPrefix }}-system/serving-cert' sit in annotations and the
        # conversion webhook. They are quoted, but strip them so the YAML is plain data.
        text = _HELM_EXPR.sub("helm-template", fh.read())
    crd = yaml.load(text, Loader=_Loader)
    if not isinstance(crd, dict) or crd.get("kind") != "CustomResourceDefinition":
        raise ValueError(f"{crd_path}: not a CustomResourceDefinition")
    kind = crd.get("spec", {}).get("names", {}).get("kind")
    group = crd["spec"].get("group")
    if not isinstance(kind, str) or not kind or not isinstance(group, str) or not group:
        raise ValueError(f"{crd_path}: CRD names no kind or group")
    for version in crd["spec"].get("versions", []):
        if version.get("name") == schema_version:
            raw = version["schema"]["openAPIV3Schema"]
            break
    else:
        raise ValueError(f"{crd_path}: CRD has no version {schema_version}")
    schema = convert(raw)
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    jsonschema.Draft4Validator.check_schema(schema)
    return Target(kind, f"{group}/{schema_version}", schema)


def format_path(path):
    parts = []
    for p in path:
        if isinstance(p, int):
            parts.append(f"[{p}]")
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts) or "(root)"


def document_errors(target, validator, doc):
    """All problems with one document of the target kind, as (path, message)."""
    problems = []
    if doc.get("apiVersion") != target.api_version:
        problems.append(("apiVersion", f"{doc.get('apiVersion')!r} is not {target.api_version!r}"))
    if doc.get("kind") != target.kind:
        problems.append(("kind", f"{doc.get('kind')!r} is not {target.kind!r}"))
    metadata = doc.get("metadata")
    if not isinstance(metadata, dict) or not any(
        isinstance(metadata.get(k), str) and metadata.get(k) for k in ("name", "generateName")
    ):
        problems.append(("metadata", "metadata.name (or generateName) must be a non-empty string"))
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    for err in errors:
        problems.append((format_path(err.absolute_path), err.message))
    return problems


def is_candidate(target, doc):
    """Documents that are, or were evidently meant to be, of the target kind."""
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.lower() == target.kind.lower()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--crd", required=True, help="the CustomResourceDefinition YAML")
    parser.add_argument("--version", default="v1", help="the CRD version to check (default v1)")
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files to check")
    args = parser.parse_args(argv)

    try:
        target = load_schema(args.crd, args.version)
    except (OSError, ValueError, yaml.YAMLError, jsonschema.SchemaError) as exc:
        print(f"error: cannot load CRD schema: {exc}", file=sys.stderr)
        return 2
    validator = jsonschema.Draft4Validator(target.schema)
    kind = target.kind

    n_valid = n_invalid = n_errors = 0
    input_problem = False
    for path in args.files:
        try:
            with open(path, encoding="utf-8") as fh:
                docs = list(yaml.load_all(fh, Loader=_Loader))
        except OSError as exc:
            print(f"{path}: error: cannot read: {exc}")
            input_problem = True
            continue
        except yaml.YAMLError as exc:
            print(f"{path}: error: invalid YAML: {exc}")
            n_errors += 1
            continue
        found = 0
        for index, doc in enumerate(docs, start=1):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                print(f"{path}: document {index}: error: not a mapping ({type(doc).__name__})")
                n_errors += 1
                continue
            if not is_candidate(target, doc):
                continue
            found += 1
            name = (doc.get("metadata") or {}).get("name", "?") if isinstance(doc.get("metadata"), dict) else "?"
            problems = document_errors(target, validator, doc)
            for where, message in problems:
                print(f"{path}: document {index} ({kind} {name}): {where}: {message}")
            n_errors += len(problems)
            if problems:
                n_invalid += 1
            else:
                n_valid += 1
        if not found:
            print(f"{path}: error: no {kind} document in this file")
            input_problem = True

    if n_errors:
        print(f"{n_errors} error(s) in {n_invalid} {kind} document(s); {n_valid} document(s) valid")
        return 1
    if input_problem:
        return 2
    print(f"{n_valid} {kind} document(s) valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
