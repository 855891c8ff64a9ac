"""The recurrent layers every RNN model here is built from: one constructor and one weight
initialisation for ``nn.GRU`` / ``nn.LSTM`` / ``nn.RNN``.

Modeling code only (torch + transformers): ``save_pretrained`` copies this file next to the
modeling files that import it, for ``trust_remote_code`` loading without hfattn.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import initialization as init

RNN_CELLS: dict[str, type[nn.RNNBase]] = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}
"""Cell name (a config's ``cell``) → the batch-first PyTorch module."""


def build_rnn(
    cell: str,
    input_size: int,
    hidden_size: int,
    *,
    num_layers: int = 1,
    dropout: float = 0.0,
    bidirectional: bool = False,
) -> nn.RNNBase:
    """A batch-first ``cell`` (``"gru"``, ``"lstm"`` or ``"rnn"``) of ``num_layers`` stacked
    layers; ``dropout`` between layers only applies when there are several (PyTorch warns
    otherwise, so it is set to 0 for one layer)."""
    return RNN_CELLS[cell](
        input_size=input_size,
        hidden_size=hidden_size,
        num_layers=num_layers,
        dropout=dropout if num_layers > 1 else 0.0,
        bidirectional=bidirectional,
        batch_first=True,
    )


@torch.no_grad()
def init_rnn_weights(module: nn.RNNBase, *, unit_forget_bias: bool = False) -> None:
    """Xavier-uniform input matrices, orthogonal recurrent matrices and zero biases for every
    layer and direction of ``module``; with ``unit_forget_bias`` an LSTM's input-side
    forget-gate bias is 1 (Keras' ``unit_forget_bias``). Parameters already loaded from a
    checkpoint (``_is_hf_initialized``) are left as they are."""
    for name, param in module.named_parameters():
        if name.startswith("weight_ih"):
            init.xavier_uniform_(param)
        elif name.startswith("weight_hh"):
            init.orthogonal_(param)
        elif not getattr(param, "_is_hf_initialized", False):  # a slice may be set below
            init.zeros_(param)
            if unit_forget_bias and isinstance(module, nn.LSTM) and name.startswith("bias_ih"):
                size = module.hidden_size  # gates i, f, g, o: f is the second block
                init.ones_(param[size : 2 * size])
