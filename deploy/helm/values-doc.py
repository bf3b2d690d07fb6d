#!/usr/bin/env python3
"""Writes the values table of the chart (docs/helm-values.md) from the `# --` comments of
registry-cache/values.yaml, helm-docs style: a `# -- text` comment (continued by the `#` lines
right after it) documents the key below it, with its default from the file. With --check, exits 1
when the committed table differs from the generated one, or when a value is covered by no
documented key (every leaf must have a documented key at or above it). Needs PyYAML."""
import json
import pathlib
import re
import sys

import yaml

here = pathlib.Path(__file__).resolve().parent
values_file = here / "registry-cache" / "values.yaml"
out_file = here.parent.parent / "docs" / "helm-values.md"


def documented(lines):
    """(dotted key path, description) for each key with a `# --` comment, in file order."""
    rows, stack, pending = [], [], None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("# --"):
            pending = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if pending is not None:
                pending.append(stripped[1:].strip())
            continue
        m = re.match(r"^( *)([A-Za-z0-9_.-]+):", line)
        if not m or line.lstrip().startswith("- "):
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(2)))
        if pending is not None:
            rows.append((".".join(k for _, k in stack), " ".join(pending)))
            pending = None
    return rows


def lookup(values, path):
    for part in path.split("."):
        values = values[part]
    return values


def leaves(values, prefix=""):
    if isinstance(values, dict) and values:
        for k, v in values.items():
            yield from leaves(v, prefix + k + ".")
    else:
        yield prefix[:-1]


def main():
    text = values_file.read_text()
    values = yaml.safe_load(text)
    rows = documented(text.splitlines())
    keys = [k for k, _ in rows]
    missing = [leaf for leaf in leaves(values)
               if not any(leaf == k or leaf.startswith(k + ".") for k in keys)]
    table = ["# registry-cache chart: values",
             "",
             "Generated from the `# --` comments of `deploy/helm/registry-cache/values.yaml` by",
             "`deploy/helm/values-doc.py`; do not edit by hand. The schema `values.schema.json` refuses",
             "unknown keys and wrong types at `helm install` / `helm template`.",
             "",
             "| key | default | description |",
             "|---|---|---|"]
    for key, description in rows:
        default = json.dumps(lookup(values, key), separators=(",", ":"))
        if len(default) > 60:
            default = "see values.yaml"
        table.append("| `%s` | `%s` | %s |" % (key, default.replace("|", "\\|"), description.replace("|", "\\|")))
    generated = "\n".join(table) + "\n"
    bad = 0
    for leaf in missing:
        print("values-doc: %s has no `# --` comment at or above it" % leaf, file=sys.stderr)
        bad = 1
    if "--check" in sys.argv[1:]:
        if not out_file.exists() or out_file.read_text() != generated:
            print("values-doc: %s is not the table of values.yaml; run deploy/helm/values-doc.py" % out_file, file=sys.stderr)
            bad = 1
    else:
        out_file.write_text(generated)
    sys.exit(bad)


main()
