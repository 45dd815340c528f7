"""The package's YAML reader against PyYAML (in the venv, not a dependency of the package)."""
import glob
import math
import re
import os

import h5py
import pytest
import yaml

from attnlab import _yaml
from conftest import SOURCE


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML reads YAML 1.1, where 1e-05 (no dot) is a string; attnlab's runner (yaml-cpp) and the
    package read YAML 1.2's core schema, where it is a float. This loader reads floats as 1.2 does."""


# No timestamps either: YAML 1.2's core schema has none ("created: 2026-11-27T01:17:53Z" is a string).
Yaml12Loader.yaml_implicit_resolvers = {
    k: [(tag, r) for tag, r in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"),
    list("-+0123456789."))


def load12(text):
    return yaml.load(text, Loader=Yaml12Loader)


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def test_every_yaml_file_of_the_repository():
    files = [f for f in glob.glob(os.path.join(SOURCE, "**", "*.yaml"), recursive=True)
             if "/build" not in f and "/.git/" not in f]
    assert len(files) >= 30
    checked = 0
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            expected = load12(text)
        except (UnicodeDecodeError, yaml.YAMLError):
            continue  # deliberately broken test inputs
        assert _same(_yaml.load(text, f), expected), f
        checked += 1
    assert checked >= 30


def test_resolved_configs_and_manifest(d2l_run, corners_run, sweep_dir):
    for path in (d2l_run, corners_run, *glob.glob(os.path.join(sweep_dir, "*.h5"))):
        with h5py.File(path, "r") as f:
            text = f["config"].asstr()[()]
        assert _yaml.load(text) == load12(text), path
    with open(os.path.join(sweep_dir, "sweep.yaml")) as fh:
        text = fh.read()
    assert _yaml.load(text) == load12(text)


@pytest.mark.parametrize("text", [
    "a: 1\nb: [1, 2.5, x, 'y z', \"q\\tr\"]\nc: {d: true, e: null}\n",
    "list:\n  - a: 1\n    b: 2\n  - - x\n    - y\n  -\n    c: 3\n",
    "s: |\n  line one\n  line two\nt: >-\n  folded\n  text\nu: end\n",
    "x: &anchor {k: v}\ny: *anchor\nz: 'it''s'  # comment\nw: a # b\n",
    "n: [.inf, -.inf, 0x1F, 1e-05, 1.5e3, +5, ~, 'true']\n",
])
def test_constructs(text):
    assert _yaml.load(text) == load12(text)


def test_errors_name_the_line():
    with pytest.raises(_yaml.YamlError, match=r"f.yaml:2: a flow sequence does not end"):
        _yaml.load("a: 1\nb: [1, 2\nc: 3\n", "f.yaml")
    with pytest.raises(_yaml.YamlError, match=r"f.yaml:3: bad indentation"):
        _yaml.load("a:\n  b: 1\n    c: 2\n", "f.yaml")
