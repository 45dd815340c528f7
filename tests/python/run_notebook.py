#!/usr/bin/env python3
"""Runs a notebook headless (nbclient, the venv's ipykernel) and fails when any cell fails.

    python tests/python/run_notebook.py examples/notebooks/attention_in_a_notebook.ipynb [--out RUN.ipynb]

The kernel inherits the environment: ctest python.notebook sets ATTNLAB_RUNNER, PYTHONPATH (this
checkout's python/) and ATTNLAB_NOTEBOOK_RESULTS (a scratch folder). Prints each cell's time and
OK, or the failing cell's error, and exits 1. ATTNLAB_NOTEBOOK_RESULTS, when set, is emptied first.
"""
import os
import shutil
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def main() -> int:
    path = os.path.abspath(sys.argv[1])
    nb = nbformat.read(path, as_version=4)
    results = os.environ.get("ATTNLAB_NOTEBOOK_RESULTS")
    if results and os.path.isdir(results):
        shutil.rmtree(results)  # every run trains and sweeps afresh, as on a user's first run
    client = NotebookClient(nb, timeout=900, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(path)}})
    started = time.monotonic()
    try:
        client.execute()
    except CellExecutionError as e:
        print(f"{path}: a cell failed:\n{e}", file=sys.stderr)
        return 1
    code = [c for c in nb.cells if c.cell_type == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    if errors or any(c.get("execution_count") is None for c in code):
        print(f"{path}: {len(errors)} cells with errors, or cells not run", file=sys.stderr)
        return 1
    if "--out" in sys.argv:
        nbformat.write(nb, sys.argv[sys.argv.index("--out") + 1])  # the executed notebook, to look at
    print(f"{path}: {len(code)} code cells ran in {time.monotonic() - started:.0f} s")
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
