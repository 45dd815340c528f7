"""attnlab in Python: read results files, run experiments and sweeps, draw attention.

    import attnlab
    run = attnlab.run("experiments/transformer_fra_eng_d2l017.yaml", {"trainer.max_epochs": 10})
    run.metrics, run.history("train/loss"), run.translations, run.attention().show("encoder_self")
    runs = attnlab.runs("results/norm-sweep")

docs/PYTHON.md is the guide. Training happens in the C++ runner; this package starts it and
reads what it writes (docs/RESULTS.md).
"""
from .errors import (AttnlabError, ConfigError, ResultsBusy, ResultsError, RunFailed, RunInterrupted,
                     RunnerNotFound)
from .results import Run, load, register_section
from .attention import Attention, AttentionMap
from .runs import Runs, runs

__version__ = "0.1.0"
from .runner import Report, data_dir, find_runner, report, repository, resolve_experiment, run, sweep
from .interventions import ablate, prune, rollout
