"""`pip install ./python` builds, and the package reads the runner's files with h5py, numpy and
pandas alone (PyYAML, a dependency too, reads only files from before the runner wrote JSON)."""
import os
import shutil
import subprocess
import sys

from conftest import SOURCE

# Everything the package may not need for reading today's files: optional (matplotlib, tqdm), for
# older files only (yaml) or not ours.
BLOCKED = ["matplotlib", "tqdm", "yaml", "torch", "scipy", "IPython", "ipywidgets", "sacrebleu"]

PROBE = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError("blocked: " + name)
sys.meta_path.insert(0, Block())
import attnlab
assert attnlab.__file__.startswith(sys.argv[1]), attnlab.__file__
run = attnlab.load(sys.argv[2])
assert run.status == "completed"
assert len(run.metrics) > 0 and len(run.translations) == 4
att = run.attention()
assert att.weights("encoder_self", 1).weights.ndim == 3
runs = attnlab.runs(sys.argv[3])
assert len(runs) == 4 and runs.differing == ["model.encoder.norm", "seed"]
try:
    att.show("encoder_self")
except ImportError as e:
    assert "matplotlib" in str(e)
else:
    raise AssertionError("show() drew without matplotlib")
print("OK")
"""


def test_pip_install_and_no_other_dependency(tmp_path, d2l_run, sweep_dir):
    src = tmp_path / "src"
    shutil.copytree(os.path.join(SOURCE, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                                      "__pycache__", "tests"))
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--target", str(target), str(src)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (target / "attnlab" / "results.py").exists()
    meta = next(target.glob("attnlab-*.dist-info")) / "METADATA"
    requires = sorted(l.split()[1].split(">")[0] for l in meta.read_text().splitlines()
                      if l.startswith("Requires-Dist:") and "extra ==" not in l)
    assert requires == ["h5py", "numpy", "pandas", "pyyaml"]
    # The notebook extra brings a Jupyter kernel too (docs/PYTHON.md: `python -m ipykernel install`).
    notebook = sorted(l.split()[1].split(">")[0] for l in meta.read_text().splitlines()
                      if l.startswith("Requires-Dist:") and 'extra == "notebook"' in l)
    assert notebook == ["ipykernel", "ipywidgets", "matplotlib", "tqdm"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    done = subprocess.run([sys.executable, "-c", PROBE, str(target), d2l_run, sweep_dir], capture_output=True,
                          text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.strip() == "OK", done.stdout + done.stderr
