"""Figures: positional encodings, schedules, attention scores and attention maps
(:mod:`.figures`, drawn by ``hfattn plot``)."""
