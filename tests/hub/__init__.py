"""``hfattn.hub``: model cards, pushes to a (local) Hub, published models."""
