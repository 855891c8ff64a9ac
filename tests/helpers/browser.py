"""Debian's headless Chromium, which the browser tests drive through Playwright (they skip
with a reason where it is not installed: ``make browser``)."""

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
"""Flags for a headless Chromium in a container: no sandbox, GPU, updates or first-run
pages."""
