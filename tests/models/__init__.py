"""``hfattn.models``: the modeling files, attention and the transformers contracts."""
