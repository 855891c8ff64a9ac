"""``hfattn.storage`` and ``hfattn.common``: run folders, file writes, locations, the machine."""
