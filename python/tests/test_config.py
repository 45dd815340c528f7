"""A run's config and a sweep's manifest: the JSON the runner stores beside the YAML (read with the
standard library), and the YAML alone (files from before the JSON, read with PyYAML by YAML 1.2's
core schema) giving the same values, of the same types."""
import glob
import json
import math
import os
import shutil

import h5py
import pytest

import attnlab
from attnlab import _config, runs


def _typed(value):
    """The value with each leaf's type beside it: 1 and 1.0 and True differ."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, "nan" if isinstance(value, float) and math.isnan(value) else value)


def test_the_json_and_the_yaml_of_real_runs_agree(d2l_run, corners_run, sweep_dir):
    for path in (d2l_run, corners_run, *glob.glob(os.path.join(sweep_dir, "*.h5"))):
        with h5py.File(path, "r") as f:
            assert f["config_json"].shape == (1,), path
            from_json = json.loads(f["config_json"].asstr()[0])
            from_yaml = _config.load_yaml(f["config"].asstr()[()], path)
        assert _typed(from_json) == _typed(from_yaml), path
        assert attnlab.load(path).config == from_json
    config = attnlab.load(d2l_run).config
    assert config["model"]["encoder"]["num_heads"] == 4 and type(config["model"]["encoder"]["num_heads"]) is int
    assert config["model"]["encoder"]["bias"] is False and config["model"]["encoder"]["norm"] == "last"
    assert type(config["model"]["encoder"]["dropout"]) is float
    with open(os.path.join(sweep_dir, "sweep.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    with open(os.path.join(sweep_dir, "sweep.yaml"), encoding="utf-8") as f:
        assert _typed(manifest) == _typed(_config.load_yaml(f.read(), "sweep.yaml"))
    assert [type(r["seconds"]) for r in manifest["runs"]] == [float] * 4
    assert [r["exit_code"] for r in manifest["runs"]] == [0] * 4


def test_files_from_before_the_json_read_the_same(tmp_path, d2l_run, sweep_dir):
    old = tmp_path / "old.h5"
    shutil.copy(d2l_run, old)
    with h5py.File(old, "a") as f:
        del f["config_json"]
    assert attnlab.load(old).config == attnlab.load(d2l_run).config
    folder = tmp_path / "old-sweep"
    shutil.copytree(sweep_dir, folder)
    os.remove(folder / "sweep.json")
    before, after = runs(sweep_dir), runs(folder)
    assert after.manifest == before.manifest
    assert after.differing == before.differing == ["model.encoder.norm", "seed"]


def test_yaml_is_read_by_the_core_schema_of_yaml_1_2():
    text = ("no_: no\non_: on\nyes_: yes\nt: True\nexp: 1e-05\noct: 0o17\nhex: 0x1F\nlead: 007\n"
            "date: 2026-11-27\ninf: -.inf\nnull_: ~\nempty:\nquoted: '1'\nsexagesimal: 1:30\n")
    assert _typed(_config.load_yaml(text, "t.yaml")) == _typed({
        "no_": "no", "on_": "on", "yes_": "yes", "t": True, "exp": 1e-05, "oct": 15, "hex": 31, "lead": 7,
        "date": "2026-11-27", "inf": -math.inf, "null_": None, "empty": None, "quoted": "1", "sexagesimal": "1:30"})
    assert [_config.scalar(v) for v in ("no", "1e-05", "3", "first", "", "false")] == ["no", 1e-05, 3, "first",
                                                                                          None, False]


def test_a_damaged_config_names_the_file(tmp_path, corners_run):
    bad = tmp_path / "bad.h5"
    shutil.copy(corners_run, bad)
    with h5py.File(bad, "a") as f:
        del f["config_json"]
        f.create_dataset("config_json", data=["{not json"], dtype=h5py.string_dtype())
    with pytest.raises(attnlab.ResultsError, match=r"results file .*bad.h5:/config_json: not JSON"):
        attnlab.load(bad).config
