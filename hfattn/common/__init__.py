"""Small modules that every layer may import (no torch, no other hfattn import): one-line field
errors (:mod:`.field_checks`), the torch-free facts of the model families
(:mod:`.family_facts`), and the machine and checkout a result comes from (:mod:`.machine`)."""
