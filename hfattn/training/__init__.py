"""The Accelerate training loop, learning-rate schedules and per-task training steps."""
