"""Small modules that every layer may import (no torch, no other hfattn import): one-line field
errors (:mod:`.field_checks`), the torch-free facts of the model families
(:mod:`.family_facts`), the machine and checkout a result comes from (:mod:`.machine`), and
what the launcher of the process says about it (:mod:`.launch`)."""
