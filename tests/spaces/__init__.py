"""``spaces/``: the Gradio apps, launched and called."""
