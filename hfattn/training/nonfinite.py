"""The non-finite-loss policy: a NaN or infinite training loss stops the run or skips a step.

``training.on_nonfinite_loss: stop`` stops the run without saving the bad step (the last
checkpoint is kept); ``skip`` drops the gradients of the optimizer step it falls in, at most
``training.max_skipped_steps`` times. Where each loss is checked (:func:`checks_every_loss`):
at once on a CPU and with ``skip``; else (``stop`` on an accelerator) gathered on the device and
read at the next log, evaluation or checkpoint step, so that the device is never waited for
between them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from accelerate import Accelerator

from ..storage.run_folder import latest_checkpoint
from .checkpoints import Progress
from .processes import any_process
from .training_job import NonFiniteLossError

logger = logging.getLogger(__name__)

ADVICE = ". Lower training.learning_rate or set training.max_grad_norm"


def checks_every_loss(on_nonfinite_loss: str, device: torch.device) -> bool:
    """Whether each micro-batch's loss is checked for finiteness as soon as it is computed:
    with ``on_nonfinite_loss: skip`` (the optimizer step must know), and on a CPU (reading a
    host tensor costs nothing). Else (``stop`` on an accelerator) the check waits for the next
    log, evaluation or checkpoint step, so that the device is never waited for between them."""
    return on_nonfinite_loss == "skip" or torch.device(device).type == "cpu"


class NonFiniteLosses:
    """The policy of one run: ``cfg`` its ``training:`` section, ``every_loss`` the answer of
    :func:`checks_every_loss`; a stop names the newest checkpoint of ``output_dir``."""

    def __init__(self, accelerator: Accelerator, cfg, output_dir: Path, every_loss: bool):
        self.accelerator, self.cfg, self.output_dir = accelerator, cfg, output_dir
        self.every_loss = every_loss
        self.skip_step = False  # a micro-batch of the current step had a non-finite loss
        self.gathered = torch.zeros((), dtype=torch.bool, device=accelerator.device)
        self.checked_step = 0  # the step up to which every loss is known finite

    def finite(self, loss: torch.Tensor) -> bool:
        """Whether the micro-batch's ``loss`` goes to backward: checked on every process at
        once (decided together: a process that skipped backward would leave the others
        waiting in DDP's gradient all-reduce), or gathered for :meth:`check_gathered` (True)."""
        nonfinite = ~torch.isfinite(loss.detach()).all()
        if self.every_loss:
            return not any_process(self.accelerator, bool(nonfinite))
        self.gathered |= nonfinite
        return True

    def take_skip(self) -> bool:
        """Whether the optimizer step that ends now is skipped (a loss of it was not finite);
        the next step starts unskipped."""
        skip, self.skip_step = self.skip_step, False
        return skip

    def on_nonfinite(self, loss: torch.Tensor, p: Progress) -> None:
        """Skip the current optimizer step (``training.on_nonfinite_loss: skip``, up to
        ``training.max_skipped_steps`` steps), else stop.

        Raises:
            NonFiniteLossError: naming the step and the last good checkpoint (kept).
        """
        cfg = self.cfg
        value = loss.detach().float().flatten()[0].item() if loss.numel() else float("nan")
        where = f"at step {p.step + 1} (epoch {p.epoch}, batch {p.batch_in_epoch})"
        skip = cfg.on_nonfinite_loss == "skip"
        if skip and (self.skip_step or p.skipped_steps < cfg.max_skipped_steps):
            if not self.skip_step:
                p.skipped_steps += 1
                self.skip_step = True
            logger.warning(
                "training loss is %s %s: skipping this optimizer step (%d of at most %d skipped)",
                value,
                where,
                p.skipped_steps,
                cfg.max_skipped_steps,
            )
            return
        skipped = (
            f" after skipping {p.skipped_steps} steps "
            f"(training.max_skipped_steps={cfg.max_skipped_steps})"
        )
        raise NonFiniteLossError(
            f"training loss is {value} {where}; stopped without saving it"
            + (skipped if skip else "")
            + self._kept()
            + ADVICE
        )

    def check_gathered(self, p: Progress) -> None:
        """Raise when a loss gathered on the device since the last check was not finite
        (``on_nonfinite_loss: stop`` on an accelerator, where each loss is not read at once).

        Raises:
            NonFiniteLossError: naming the steps it lies between and the last good checkpoint.
        """
        if self.every_loss:
            return
        if any_process(self.accelerator, bool(self.gathered)):
            raise NonFiniteLossError(
                f"a training loss after step {self.checked_step} (up to step {p.step}, epoch "
                f"{p.epoch}) is not finite; stopped without saving it" + self._kept() + ADVICE
            )
        self.checked_step = p.step

    def _kept(self) -> str:
        kept = latest_checkpoint(self.output_dir)
        return f"; the last good checkpoint is {kept}" if kept else ""


__all__ = ["NonFiniteLosses", "checks_every_loss"]
