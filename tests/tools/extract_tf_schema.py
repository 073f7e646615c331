#!/usr/bin/env python3
"""Extracts the argument schema of Terraform resource or data-source types from a CDK for
Terraform provider package's `.jsii` manifest, in the shape of tests/data/terraform/*.schema.json.

Usage: extract_tf_schema.py <.jsii> <resources|data> <tf type>=<Config struct> ...
e.g.   extract_tf_schema.py package/.jsii resources aws_instance=InstanceConfig

Prints one JSON object: {"<tf type>": {<argument>: {...}}}. Each property's Terraform name is the
snake_case name in its Terraform Registry link (`#ami Instance#ami`); `required` is the negation
of `optional`; primitives become string/number/bool, arrays and maps of primitives list/map
with `elem`; a struct becomes a nested `block` (`"list": true` when it is an array of structs);
the IResolvable alternative of a union is dropped. Properties inherited from
`TerraformMetaArguments` (count, depends_on, provider, ...) are not arguments and are skipped.
"""
import json
import re
import sys

PRIMS = {"string": "string", "number": "number", "boolean": "bool", "any": "any", "json": "any"}


def tf_name(prop):
    docs = prop.get("docs", {})
    text = docs.get("remarks", "") + " " + docs.get("summary", "")
    m = re.search(r"#([a-z0-9_]+) [A-Za-z0-9]+#", text)
    if m:
        return m.group(1)
    return re.sub(r"(?<!^)(?=[A-Z])", "_", prop["name"]).lower()


def is_resolvable(t):
    return t.get("fqn", "").endswith(".IResolvable")


def convert(types, t):
    if "union" in t:
        options = [o for o in t["union"]["types"] if not is_resolvable(o)]
        return convert(types, options[0]) if options else {"type": "any"}
    if "primitive" in t:
        return {"type": PRIMS[t["primitive"]]}
    if "collection" in t:
        c = t["collection"]
        inner = convert(types, c["elementtype"])
        if "block" in inner:
            return {"block": inner["block"], "list": True}
        kind = "list" if c["kind"] == "array" else "map"
        return {"type": kind, "elem": inner.get("type", "any")}
    if "fqn" in t:
        return {"block": struct(types, t["fqn"])}
    return {"type": "any"}


def struct(types, fqn):
    out = {}
    for prop in types[fqn].get("properties", []):
        if prop.get("docs", {}).get("stability") == "deprecated" and False:
            continue
        entry = convert(types, prop["type"])
        entry["required"] = not prop.get("optional", False)
        out[tf_name(prop)] = dict(sorted(entry.items()))
    return dict(sorted(out.items()))


def main():
    jsii, _section, *pairs = sys.argv[1:]
    types = json.load(open(jsii))["types"]
    result = {}
    for pair in pairs:
        tf_type, config = pair.split("=")
        fqn = next(k for k in types if k.endswith("." + config) and types[k]["kind"] == "interface")
        result[tf_type] = struct(types, fqn)
    print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
