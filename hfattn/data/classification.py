"""Labelled texts for sequence classification: embedded tasks, local files and Hub datasets.

:func:`load_classification_data` returns a :class:`ClassificationData`: ``train`` /
``validation`` / ``test`` ``datasets.Dataset`` splits with a ``text`` column (str) and a
``label`` column (int, a ``ClassLabel`` over ``label_names``). Sources:

- an embedded name from :data:`EMBEDDED_SOURCES` (``genre``: the genre of a Shakespeare passage,
  ``reber``: Reber-grammar strings, ``reviews-es``: the 14 Spanish reviews of Navarro Castillo,
  2022), each a loader ``(seed) -> ClassificationData`` imported when first used;
- a local ``.csv`` / ``.tsv`` / ``.json`` / ``.jsonl`` / ``.parquet`` file
  (:mod:`hfattn.data.tables`; one split: test and validation are carved from it), a folder
  written by ``Dataset(Dict).save_to_disk``, or a local dataset folder;
- a Hub dataset id (``datasets.load_dataset``), e.g. ``imdb`` (train/test: validation is carved
  from train) or ``stanfordnlp/sst2`` (``text_column: sentence``).

Splits. The source's own ``train`` / ``validation`` / ``test`` are kept whole; a missing
``test`` is carved from ``train`` (``test_fraction``), then a missing ``validation`` too
(``validation_fraction``), both stratified by label (seeded), each at most
``max_held_out_rows`` rows (:func:`hfattn.data.held_out.capped`). Model selection never looks at
test. A split whose labels are all missing (``-1``) is unlabelled: GLUE's SST-2 ships its test
that way, so its labelled ``validation`` (872 sentences) becomes ``test`` and a new validation
is carved from ``train`` — the SST-2 "test" figures are therefore the GLUE dev-set figures that
papers report.

Labels. A ``ClassLabel`` column keeps its names; other values (strings, integers, booleans)
become classes ``0..K-1`` in sorted order of the values seen in ``train``. A validation or test
label never seen in ``train`` is an error, as are missing columns, non-string texts and
missing labels — each one :class:`~hfattn.recipes.schema.RecipeError` naming the ``data.`` field.

A source that is none of these fails at once (:func:`check_classification_source`, which
``hfattn train`` runs before anything is loaded: this module imports neither torch nor
``datasets``).

:class:`LabelBatches` are the training batches: shuffled, length-grouped and right-padded like
:class:`~hfattn.batching.seq2seq.PairBatches`, with one ``labels`` id per row (defined in
:mod:`hfattn.batching.seq2seq`, with torch, and imported from here on first use).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.field_checks import RecipeError, require
from .held_out import capped
from .sources import check_source
from .tables import TABLE_FORMATS, load_table_file

EMBEDDED_SOURCES = {
    "genre": "hfattn.data.genre:load_genre",
    "reber": "hfattn.data.reber:load_reber",
    "reviews-es": "hfattn.data.reviews_es:load_reviews",
}
"""Embedded task name → ``"module:function"`` of its loader
``(seed: int) -> ClassificationData``."""

SPLIT_NAMES = ("train", "validation", "test")
MISSING_LABEL = -1
"""The label value ``datasets`` uses for an unlabelled row (GLUE test splits)."""


@dataclass
class ClassificationData:
    """Labelled splits: ``splits[name]`` has columns ``text`` (str) and ``label`` (int in
    ``0..len(label_names)-1``); ``label_names[i]`` names class ``i``."""

    splits: dict[str, Any]
    label_names: list[str]

    def __post_init__(self):
        missing = [s for s in SPLIT_NAMES if s not in self.splits]
        if missing:
            raise ValueError(f"classification data lacks the split(s) {', '.join(missing)}")
        for name, split in self.splits.items():
            if not {"text", "label"} <= set(split.column_names):
                raise ValueError(
                    f"split {name!r} needs columns text and label, has {split.column_names}"
                )

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def texts(self, split: str) -> list[str]:
        return list(self.splits[split]["text"])

    def labels(self, split: str) -> list[int]:
        return [int(v) for v in self.splits[split]["label"]]

    @classmethod
    def from_lists(
        cls, splits: dict[str, tuple[Sequence[str], Sequence[int]]], label_names: Sequence[str]
    ) -> ClassificationData:
        """Build from ``{split: (texts, label ids)}`` (the embedded loaders' helper)."""
        return cls(
            {
                name: make_dataset(texts, labels, label_names)
                for name, (texts, labels) in splits.items()
            },
            list(label_names),
        )

    def sizes(self) -> dict[str, int]:
        """Examples per split."""
        return {name: len(split) for name, split in self.splits.items()}


def make_dataset(texts: Sequence[str], labels: Sequence[int], label_names: Sequence[str]):
    """A ``Dataset`` with ``text`` (string) and ``label`` (``ClassLabel(label_names)``) columns."""
    import datasets

    features = datasets.Features(
        {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(label_names))}
    )
    return datasets.Dataset.from_dict(
        {"text": list(texts), "label": [int(v) for v in labels]}, features=features
    )


# ---- loading ---------------------------------------------------------------------------------
def check_classification_source(source: str) -> None:
    """Refuse at once a ``data.source`` that is not an embedded task, an existing file or
    folder, or a Hub dataset id (``owner/name``, or a canonical ``name`` such as ``imdb``)
    that can be loaded (:func:`hfattn.data.sources.check_source`)."""
    check_source(source, EMBEDDED_SOURCES, bare_hub_ids=True)


def load_embedded(name: str, seed: int) -> ClassificationData:
    """Call the loader registered as ``name`` in :data:`EMBEDDED_SOURCES`."""
    module_name, function = EMBEDDED_SOURCES[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise RecipeError(
            f"data.source: the embedded task {name!r} is not available ({err})"
        ) from None
    return getattr(module, function)(seed)


def load_classification_data(
    source: str,
    *,
    text_column: str = "text",
    label_column: str = "label",
    validation_fraction: float = 0.1,
    test_fraction: float = 0.1,
    max_held_out_rows: int | None = None,
    seed: int = 0,
    train_size: int | None = None,
) -> ClassificationData:
    """Load labelled ``train`` / ``validation`` / ``test`` texts (see the module docstring).

    Args:
        source: an embedded name, a local file or folder, or a Hub dataset id.
        text_column, label_column: the columns of a file or dataset source (embedded sources
            have their own).
        validation_fraction, test_fraction: the shares of ``train`` carved out for a missing
            validation / test split (0: that split is empty; a recipe holds out more than 0,
            a file scored whole nothing).
        max_held_out_rows: the most rows of each split carved that way (``None``: no bound);
            a source's own splits are kept whole.
        seed: drives the embedded generators and the carving.
        train_size: keep a seeded random ``train_size`` examples of ``train`` (held-out splits
            are never cut).

    Raises:
        RecipeError: naming the ``data.`` field (a Hub dataset that cannot be loaded, missing
            column, non-string texts, missing labels, held-out labels unseen in train).
        ValueError, FileNotFoundError: a source that is no dataset at all, at once
            (:func:`check_classification_source`).
    """
    for name, value in (
        ("validation_fraction", validation_fraction),
        ("test_fraction", test_fraction),
    ):
        require(0 <= value < 0.5, f"data.{name}", f"must be in [0, 0.5), got {value}")
    for name, value in (("train_size", train_size), ("max_held_out_rows", max_held_out_rows)):
        require(value is None or value > 0, f"data.{name}", f"must be > 0, got {value}")
    if source in EMBEDDED_SOURCES:
        data = load_embedded(source, seed)
    else:
        check_classification_source(source)
        raw = _load_raw(source)
        data = _to_classification_data(raw, source, text_column, label_column)
        data = _carve(data, validation_fraction, test_fraction, max_held_out_rows, seed)
    if train_size is not None and train_size < len(data.splits["train"]):
        train = data.splits["train"].shuffle(seed=seed).select(range(train_size))
        data = ClassificationData({**data.splits, "train": train}, data.label_names)
    return data


def _load_raw(source: str) -> dict:
    """``{split: Dataset}`` of a file, a saved dataset folder or a Hub id."""
    import datasets

    path = Path(source).expanduser()
    if path.is_file():
        require(
            path.suffix.lower() in TABLE_FORMATS,
            "data.source",
            f"{source!r} is not a {', '.join(TABLE_FORMATS)} file",
        )
        loaded = load_table_file(path)
    elif (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        loaded = datasets.load_from_disk(str(path))
    elif path.is_dir():
        loaded = datasets.load_dataset(str(path))
    else:  # a Hub id (check_classification_source has refused anything else)
        try:
            loaded = datasets.load_dataset(source)
        except Exception as err:  # offline, unknown id: one message naming the field
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise RecipeError(
                f"data.source: {source!r} is not an embedded task ({', '.join(EMBEDDED_SOURCES)}), "
                f"an existing file or folder, or a loadable Hub dataset ({reason})"
            ) from None
    if isinstance(loaded, datasets.Dataset):
        loaded = {"train": loaded}
    require(
        "train" in loaded, "data.source", f"{source} has no train split (splits: {list(loaded)})"
    )
    return {name: loaded[name] for name in SPLIT_NAMES if name in loaded}


def _column_values(split, name: str, column: str, field: str, source: str) -> list:
    require(
        column in split.column_names,
        f"data.{field}",
        f"{column!r} is not a column of the {name} split of {source} "
        f"(columns: {', '.join(split.column_names)})",
    )
    return list(split[column])


def _to_classification_data(raw: dict, source: str, text_column: str, label_column: str):
    """Check the columns, drop unlabelled splits and map the labels to ``0..K-1``."""
    import datasets

    texts, values = {}, {}
    for name, split in raw.items():
        texts[name] = _column_values(split, name, text_column, "text_column", source)
        values[name] = _column_values(split, name, label_column, "label_column", source)
    feature = raw["train"].features[label_column]
    class_label = isinstance(feature, datasets.ClassLabel)
    if class_label:  # -1 marks a missing label
        for name in [n for n in SPLIT_NAMES if n != "train" and n in values]:
            if values[name] and all(v == MISSING_LABEL for v in values[name]):
                del texts[name], values[name]  # an unlabelled split (GLUE test)
        if "test" not in values and "validation" in values:  # SST-2: its dev set becomes test
            texts["test"], values["test"] = texts.pop("validation"), values.pop("validation")
    for name in values:
        bad = [i for i, v in enumerate(values[name]) if v is None or (class_label and v < 0)]
        require(
            not bad,
            "data.label_column",
            f"{len(bad)} row(s) of the {name} split of {source} have no {label_column!r} "
            f"(first: row {bad[0] if bad else None})",
        )
        odd = [i for i, t in enumerate(texts[name]) if not isinstance(t, str)]
        require(
            not odd,
            "data.text_column",
            f"{text_column!r} must hold strings; row {odd[0] if odd else None} of the {name} "
            f"split of {source} is {texts[name][odd[0]] if odd else None!r} "
            f"({type(texts[name][odd[0]]).__name__ if odd else ''})",
        )
    if class_label:
        label_names = list(feature.names)
        ids = values
    else:
        seen = sorted(set(values["train"]), key=lambda v: (str(type(v)), v))
        label_names = [str(v) for v in seen]
        index = {v: i for i, v in enumerate(seen)}
        for name in values:
            unseen = sorted({str(v) for v in values[name] if v not in index})
            require(
                not unseen,
                "data.label_column",
                f"label(s) {', '.join(unseen)} of the {name} split of {source} never occur in "
                f"train (train labels: {', '.join(label_names)})",
            )
        ids = {name: [index[v] for v in vals] for name, vals in values.items()}
    in_train = set(ids["train"])
    for name in ids:
        unseen = sorted({label_names[v] for v in ids[name] if v not in in_train})
        require(
            not unseen,
            "data.label_column",
            f"label(s) {', '.join(unseen)} of the {name} split of {source} never occur in "
            f"train (train labels: {', '.join(label_names[v] for v in sorted(in_train))})",
        )
    splits = {name: make_dataset(texts[name], ids[name], label_names) for name in ids}
    return _Partial(splits, label_names)


@dataclass
class _Partial:
    """Splits before carving (``validation`` / ``test`` may be missing)."""

    splits: dict[str, Any]
    label_names: list[str]


def _carve(
    data: _Partial, validation_fraction: float, test_fraction: float, cap: int | None, seed: int
):
    """Carve a missing ``test``, then a missing ``validation``, out of ``train`` (its fraction
    of the original ``train``, at most ``cap`` rows; stratified by label when every class has
    enough examples; seeded); a fraction of 0 carves an empty split."""
    splits = dict(data.splits)
    n = len(splits["train"])
    for name, fraction in (("test", test_fraction), ("validation", validation_fraction)):
        if name in splits:
            continue
        if fraction == 0:
            splits[name] = splits["train"].select([])
            continue
        n_held = capped(max(1, round(n * fraction)), cap)
        require(
            len(splits["train"]) > n_held,
            "data.source",
            f"{len(splits['train'])} training examples are too few to carve a {name} split",
        )
        try:
            parts = splits["train"].train_test_split(
                test_size=n_held, seed=seed, stratify_by_column="label"
            )
        except ValueError:  # a class too small to stratify: a plain random cut
            parts = splits["train"].train_test_split(test_size=n_held, seed=seed)
        splits["train"], splits[name] = parts["train"], parts["test"]
    return ClassificationData({name: splits[name] for name in SPLIT_NAMES}, data.label_names)


__all__ = [
    "EMBEDDED_SOURCES",
    "ClassificationData",
    "check_classification_source",
    "load_classification_data",
    "load_embedded",
    "make_dataset",
]
