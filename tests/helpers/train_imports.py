"""What ``hfattn train`` imports as it trains a recipe of each task (char-RNN, translation,
classification), imported once by the fork server of :mod:`tests.helpers.crash_runs` (its
``set_forkserver_preload``): each killed or resumed run that it starts then spends its time on
the run, not on the 2-3 s of imports that ``hfattn.cli`` leaves to its commands (to start
fast) and that a fresh process would do again."""

import datasets  # noqa: F401  (datasets, evaluate, sacrebleu: the imports of the metric
import evaluate  # noqa: F401  modules, which each run imports by path: load_metric)
import matplotlib.backends.backend_agg  # noqa: F401  (the loss curve)
import matplotlib.figure  # noqa: F401
import rich.console  # noqa: F401  (the table of scores)
import rich.table  # noqa: F401
import sacrebleu  # noqa: F401

import hfattn.batching.lm  # noqa: F401
import hfattn.cli
import hfattn.commands.logging_setup  # noqa: F401
import hfattn.commands.report  # noqa: F401
import hfattn.data.reber  # noqa: F401
import hfattn.evaluation.classification  # noqa: F401
import hfattn.evaluation.language_modeling  # noqa: F401
import hfattn.evaluation.translation  # noqa: F401
import hfattn.models  # noqa: F401
import hfattn.orchestration.run  # noqa: F401
import hfattn.plotting.figures  # noqa: F401
import hfattn.recipes  # noqa: F401
import hfattn.tasks.causal_lm.task  # noqa: F401
import hfattn.tasks.classification.task  # noqa: F401
import hfattn.tasks.translation.task  # noqa: F401
import hfattn.training.engine  # noqa: F401

hfattn.cli.build_parser()  # imports the module of every command
