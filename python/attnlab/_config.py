"""Reading the configs and manifests the runner writes: a run's resolved config and a sweep's
manifest. The runner stores each as JSON too (/config_json beside /config, sweep.json beside
sweep.yaml; docs/RESULTS.md), read here with the standard library. Files written before that have
the YAML alone: PyYAML reads them (a dependency of the package, imported only then) with YAML
1.2's core schema, the one yaml-cpp (the runner) reads and the runner's JSON follows, so that a
value has one type either way: only true/false are booleans ("no", "on", "yes" stay strings),
1e-05 is a float, 0o17 and 0x1F are integers, and there are no timestamps.
"""
from __future__ import annotations

import json
import math
import os
import re

__all__ = ["ConfigFormatError", "load_json", "load_yaml", "scalar", "read_manifest"]


class ConfigFormatError(ValueError):
    """Text that is neither the JSON nor the YAML the runner writes; the message names the file."""


_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def _int(text: str) -> int:
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _float(text: str) -> float:
    t = text.lower()
    if t.endswith(".inf"):
        return -math.inf if t.startswith("-") else math.inf
    if t == ".nan":
        return math.nan
    return float(text)


def scalar(text: str):
    """A plain YAML scalar's value by the core schema (an override's value as the runner reads it)."""
    t = text.strip()
    if _NULL.match(t):
        return None
    if _BOOL.match(t):
        return t.lower() == "true"
    if _INT.match(t):
        return _int(t)
    if _FLOAT.match(t):
        return _float(t)
    return t


def load_json(text: str, where: str):
    try:
        return json.loads(text)
    except ValueError as e:
        raise ConfigFormatError(f"{where}: not JSON: {e}") from None


_LOADER = None


def _loader():
    """PyYAML's SafeLoader with YAML 1.2's core schema in place of its YAML 1.1 resolvers."""
    global _LOADER
    if _LOADER is None:
        import yaml

        class Loader(yaml.SafeLoader):
            pass

        Loader.yaml_implicit_resolvers = {}
        for tag, pattern, first in (("null", _NULL, ["~", "n", "N", ""]), ("bool", _BOOL, list("tTfF")),
                                    ("int", _INT, list("-+0123456789")), ("float", _FLOAT, list("-+0123456789."))):
            Loader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", pattern, first)
        Loader.add_constructor("tag:yaml.org,2002:int", lambda loader, node: _int(loader.construct_scalar(node)))
        Loader.add_constructor("tag:yaml.org,2002:float", lambda loader, node: _float(loader.construct_scalar(node)))
        Loader.add_constructor("tag:yaml.org,2002:bool",
                               lambda loader, node: loader.construct_scalar(node).lower() == "true")
        _LOADER = Loader
    return _LOADER


def load_yaml(text: str, where: str):
    """YAML written by an older runner (no JSON beside it)."""
    import yaml
    try:
        return yaml.load(text, Loader=_loader())
    except yaml.YAMLError as e:
        raise ConfigFormatError(f"{where}: not YAML attnlab reads: {' '.join(str(e).split())}") from None


def read_manifest(folder: str):
    """A sweep folder's manifest: sweep.json, unless sweep.yaml is newer (a runner from before
    sweep.json resumed the sweep) or it is absent; then sweep.yaml."""
    yaml_path, json_path = os.path.join(folder, "sweep.yaml"), os.path.join(folder, "sweep.json")
    if os.path.exists(json_path) and (not os.path.exists(yaml_path) or
                                      os.stat(json_path).st_mtime_ns >= os.stat(yaml_path).st_mtime_ns):
        with open(json_path, encoding="utf-8") as f:
            return load_json(f.read(), json_path)
    with open(yaml_path, encoding="utf-8") as f:
        return load_yaml(f.read(), yaml_path)
