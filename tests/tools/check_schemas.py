"""Checks published JSON Schemas and the documents they describe.

Usage: check_schemas.py SCHEMA [DOCUMENT...]

The schema must pass the draft 2020-12 meta-schema and every local `$ref` in it must resolve
(the meta-schema does not check that). Each DOCUMENT (JSON, or YAML when it ends in .yaml or
.yml) must validate against the schema. Every problem is printed; the exit code is 1 when
there is one.
"""

import json
import sys

import jsonschema
import yaml


def pointer(root, ref):
    node = root
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def refs(node, out):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                out.append(value)
            else:
                refs(value, out)
    elif isinstance(node, list):
        for value in node:
            refs(value, out)
    return out


def main():
    schema_path, documents = sys.argv[1], sys.argv[2:]
    problems = []
    with open(schema_path) as f:
        schema = json.load(f)
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as e:
        problems.append(f"{schema_path}: not a valid draft 2020-12 schema: {e.message}")
    for ref in sorted(set(refs(schema, []))):
        if not ref.startswith("#/") or not pointer(schema, ref):
            problems.append(f"{schema_path}: `$ref` {ref} resolves to nothing")
    validator = jsonschema.Draft202012Validator(schema)
    for path in documents:
        with open(path) as f:
            if path.endswith((".yaml", ".yml")):
                document = yaml.safe_load(f)
            else:
                document = json.load(f)
        for error in validator.iter_errors(document):
            where = "/".join(str(p) for p in error.absolute_path)
            problems.append(f"{path}: at /{where}: {error.message}")
    for p in problems:
        print(p)
    print(f"{schema_path}: {len(documents)} document(s), {len(problems)} problem(s)")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
