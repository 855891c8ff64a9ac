"""Where hfattn keeps things on disk: atomic file writes (:mod:`.file_io`), whether a name is a
local folder or a Hub id (:mod:`.location`), and the file names of a model folder
(:mod:`.model_folder`) and of a training run's folder (:mod:`.run_folder`)."""
