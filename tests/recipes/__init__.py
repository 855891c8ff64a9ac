"""``hfattn.recipes``: recipe parsing and the checks made before torch is imported."""
