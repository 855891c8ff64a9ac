"""What the benchmark scripts share: the ``--json`` report (:mod:`.benchlib`), the host-read count of a training step (:mod:`.host_reads`) and the Space load client (:mod:`.space_load`)."""
