"""What the benchmark scripts share, and the parts of the larger scripts, one job a module:

- the ``--json`` report of every script (:mod:`.benchlib`), and how ``run_all.py`` runs the
  scripts (:mod:`.bench_runs`) and writes ``RESULTS.md`` from them (:mod:`.results_report`);
- the host-read count of a training step (:mod:`.host_reads`) and a command's process tree
  watched (:mod:`.process_tree`);
- ``bench_vaswani.py``: the Vaswani model and ``MarianMTModel`` as one network
  (:mod:`.vaswani_marian`), a step timed (:mod:`.step_timing`), training
  (:mod:`.vaswani_training`), generation (:mod:`.vaswani_generation`), a recipe's own step
  (:mod:`.vaswani_recipe_step`) and the report (:mod:`.vaswani_report`);
- ``bench_data_scale.py``: the corpora (:mod:`.scale_corpora`), the cases
  (:mod:`.scale_cases`), a case's runs (:mod:`.scale_run`) and its targets
  (:mod:`.scale_targets`);
- the Space load: what each app is sent (:mod:`.space_scenarios`), the load client
  (:mod:`.space_load`), the memory over repeated requests (:mod:`.space_memory`) and the
  translation Space's engines under load (:mod:`.space_engines`).
"""
