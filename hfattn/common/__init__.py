"""Small modules that every layer may import (no torch, no other hfattn import): one-line field
errors (:mod:`.field_checks`), the facts of each model family (:mod:`.families`), the
literals and config fields of :mod:`hfattn.models` read from its source without executing it
(:mod:`.models_source`), the machine and checkout a result comes from (:mod:`.machine`), and
what the launcher of the process says about it (:mod:`.launch`)."""
