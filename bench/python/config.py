"""Experiment files as the runner reads them: `defaults: [base.yaml]` composition (maps merge
deeply, the file over its bases) and `key.path=value` overrides whose value is YAML.

Only what the Python peers need: no schema, no validation (the runner does that)."""
import copy
import os

import yaml


def _merge(base, over):
    """Deep merge: maps merge key by key, anything else in `over` replaces `base`."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def load_experiment(path, overrides=()):
    """The experiment as a plain dict: defaults first, then this file, then the overrides."""
    with open(path, encoding="utf-8") as f:
        node = yaml.safe_load(f) or {}
    merged = {}
    for base in node.pop("defaults", []) or []:
        merged = _merge(merged, load_experiment(os.path.join(os.path.dirname(path), base)))
    merged = _merge(merged, node)
    for assignment in overrides:
        key, sep, value = assignment.partition("=")
        if not sep:
            raise ValueError(f"malformed override '{assignment}': expected key=value")
        parts = key.split(".")
        cur = merged
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = yaml.safe_load(value)
    return merged
