"""The transformers way of a sweep, as docs/sweeps.md shows it: ``Seq2SeqTrainer
.hyperparameter_search(backend="optuna")`` on an hfattn Vaswani model (2 trials, 4 steps each,
on reversed sequences of random tokens)."""

from __future__ import annotations

import math

import torch


def test_seq2seq_trainer_hyperparameter_search_on_a_vaswani_model(tmp_path):
    import optuna
    from datasets import Dataset
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    from hfattn import VaswaniConfig, VaswaniForConditionalGeneration

    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, 16, (96, 6), generator=g)
    pairs = Dataset.from_dict({"input_ids": src.tolist(), "labels": src.flip(1).tolist()})
    train, held_out = pairs.select(range(64)), pairs.select(range(64, 96))
    built = []  # the models the trials trained (not in the docs' example)

    # --- as in docs/sweeps.md
    def model_init(trial):
        config = VaswaniConfig(vocab_size=16, encoder_layers=1, decoder_layers=1, d_model=16,
                               num_heads=2, ffn_dim=32, max_position_embeddings=16,
                               pad_token_id=0, eos_token_id=3, decoder_start_token_id=1)  # fmt: skip
        built.append(VaswaniForConditionalGeneration(config))
        return built[-1]

    def hp_space(trial):
        return {"learning_rate": trial.suggest_float("learning_rate", 1e-4, 1e-2, log=True)}

    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path / "hp"), max_steps=4, per_device_train_batch_size=16,
        eval_strategy="no", save_strategy="no", logging_strategy="no", report_to=[],
        use_cpu=True, seed=0, disable_tqdm=True,
    )  # fmt: skip
    trainer = Seq2SeqTrainer(
        model_init=model_init, args=args, train_dataset=train, eval_dataset=held_out
    )
    storage = f"sqlite:///{tmp_path / 'hp.db'}"
    best = trainer.hyperparameter_search(
        hp_space=hp_space, backend="optuna", n_trials=2, direction="minimize",
        storage=storage, study_name="vaswani-lr",
    )  # fmt: skip
    # ---

    study = optuna.load_study(study_name="vaswani-lr", storage=storage)
    values = [t.value for t in study.trials]
    rates = [t.params["learning_rate"] for t in study.trials]
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE"]
    assert all(1e-4 <= r <= 1e-2 for r in rates) and rates[0] != rates[1]
    # each trial's objective is the eval loss of its own model: below the loss of a uniform
    # guess over the 16 tokens after 4 steps, and different for different learning rates
    assert all(math.isfinite(v) and 0 < v < 1.2 * math.log(16) for v in values)
    assert values[0] != values[1]
    assert best.objective == min(values) == study.best_value
    assert best.hyperparameters == {"learning_rate": study.best_params["learning_rate"]}
    # one fresh hfattn model per trial (and the one the Trainer builds first)
    assert len(built) == 3 and len({id(m) for m in built}) == 3
