"""Publishing to the Hugging Face Hub: model repos with rendered model cards, and Gradio Spaces.

``push_model_folder`` is what ``hfattn push`` and ``hub.push_to_hub: true`` in a recipe call;
``render_model_card`` and ``stage_space`` are its building blocks.
"""

from .card import render_model_card
from .folder_inspection import HubSettings, ModelFolder, ModelFolderError, inspect_folder
from .push import HubPushError, push_model_folder, validate_repo_id
from .space import SpaceError, load_space_app, stage_space

__all__ = [
    "HubPushError",
    "HubSettings",
    "ModelFolder",
    "ModelFolderError",
    "SpaceError",
    "inspect_folder",
    "load_space_app",
    "push_model_folder",
    "render_model_card",
    "stage_space",
    "validate_repo_id",
]
