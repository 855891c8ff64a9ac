"""A training run from its recipe to its trained (and published) model (:mod:`.run`): the layer
above the tasks, the engine and the Hub."""
