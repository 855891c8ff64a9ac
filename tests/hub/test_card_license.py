"""A card's ``license``: the recipe's ``hub.license``, else the declared licence of its data
(each embedded source declares one, in the data module that owns it), else unknown, and then
``hfattn push`` and ``hub.push_to_hub`` refuse until one is given."""

from __future__ import annotations

import shutil
from dataclasses import astuple
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard, SpaceCard

from hfattn.cli import main
from hfattn.data import classification, text, translation
from hfattn.data.licenses import HFATTN_GENERATED, PUBLIC_DOMAIN, UNICODE_3, declared_licenses
from hfattn.hub import HubSettings, ModelFolderError, inspect_folder
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.recipes.schema import HubSection, RecipeError
from tests.helpers.recipe_helpers import write_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
PD_LINK = "https://creativecommons.org/publicdomain/mark/1.0/"
FINE_TUNES = {
    "gpt2_shakespeare.yaml": "mit",
    "gpt2_shakespeare_lora.yaml": "mit",
    "distilbert_imdb.yaml": "apache-2.0",
    "distilbert_imdb_lora.yaml": "apache-2.0",
    "distilbert_sst2.yaml": "apache-2.0",
    "distilbert_sst2_lora.yaml": "apache-2.0",
    "minilm_genre.yaml": "apache-2.0",
    "minilm_genre_lora.yaml": "apache-2.0",
}
"""Fine-tunes of pretrained models: the base model's licence, set in the recipe."""


def test_every_embedded_source_declares_its_license_once():
    declared = declared_licenses()
    embedded = {*text.EMBEDDED, *translation.EMBEDDED, *classification.EMBEDDED_SOURCES}
    assert set(declared) == embedded
    assert declared["shakespeare"] == declared["genre"] == declared["bible"] == PUBLIC_DOMAIN
    assert astuple(PUBLIC_DOMAIN) == ("other", "public-domain", PD_LINK)
    assert declared["dates"] == UNICODE_3
    assert astuple(UNICODE_3) == ("other", "unicode-3.0", "https://www.unicode.org/license.txt")
    assert declared["numbers"] == declared["date-normalization"] == declared["reber"]
    assert declared["reber"] == HFATTN_GENERATED
    assert astuple(HFATTN_GENERATED) == ("apache-2.0", None, None)
    assert declared["reviews-es"] is None  # the thesis states no licence


@pytest.mark.parametrize(
    ("data", "hub", "expected"),
    [
        ({"source": "shakespeare"}, {}, ("other", "public-domain", PD_LINK, "shakespeare")),
        ({"source": "dates"}, {}, ("other", "unicode-3.0", UNICODE_3.link, "dates")),
        ({"source": "bible"}, {}, ("other", "public-domain", PD_LINK, "bible")),
        ({"source": "reber"}, {}, ("apache-2.0", None, None, "reber")),
        ({"source": "data/input.txt"}, {}, (None, None, None, None)),
        ({"source": "stanfordnlp/imdb"}, {}, (None, None, None, None)),
        (None, {}, (None, None, None, None)),  # a folder without a recipe
        ({"source": "shakespeare"}, {"license": "mit"}, ("mit", None, None, None)),
        (
            {"source": "a.txt"},
            {"license": "other", "license_name": "x"},
            ("other", "x", None, None),
        ),
    ],
)
def test_the_recipe_then_the_data_give_the_license(data, hub, expected):
    recipe = None if data is None else {"data": data, "hub": {"license": None, **hub}}
    settings = HubSettings.from_recipe(recipe)
    got = (settings.license, settings.license_name, settings.license_link)
    assert (*got, settings.license_source) == expected


def test_shipped_recipes_have_a_license():
    unlicensed = []
    for path in sorted(RECIPES.glob("*.yaml")):
        resolved = yaml.safe_load(load_recipe(path).to_yaml())
        license = HubSettings.from_recipe(resolved).license
        if license is None:
            unlicensed.append(path.name)
        assert license == FINE_TUNES.get(path.name, license), path.name
    assert unlicensed == ["baseline_reviews_es.yaml"]  # a baseline report, never pushed


def test_bad_licenses_name_the_field_and_the_form(tmp_path):
    with pytest.raises(RecipeError) as err:
        HubSection(license="Apache 2.0")
    message = str(err.value)
    assert message.startswith("hub.license: 'Apache 2.0' is not a Hub license id: lowercase")
    assert "apache-2.0" in message and "\n" not in message
    with pytest.raises(RecipeError, match="hub.license_name: is required with license: other"):
        HubSection(license="other")
    with pytest.raises(RecipeError, match="hub.license_name: 'x' names a licence but hub.license"):
        HubSection(license_name="x")
    with pytest.raises(RecipeError, match="hub.license: 'MIT' is not a Hub license id"):
        load_recipe(RECIPES / "char_rnn_shakespeare.yaml", ["hub.license=MIT"])
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("hub:\n  license: Apache-2.0\n")
    with pytest.raises(ModelFolderError, match="recipe.yaml hub.license: 'Apache-2.0' is not"):
        HubSettings.from_recipe(yaml.safe_load(recipe.read_text()))


def _copy_with(run: Path, dest: Path, **data) -> Path:
    """A copy of ``run`` whose recipe sets no ``hub.license`` (the data's licence decides) and
    whose ``data`` section is updated with ``data``."""
    shutil.copytree(run, dest)
    recipe = yaml.safe_load((dest / "recipe.yaml").read_text())
    recipe["hub"].pop("license", None)
    recipe["data"].update(data)
    (dest / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    return dest


def test_push_refuses_an_unknown_license_until_one_is_given(
    hub_server, char_rnn_run, tmp_path, capsys
):
    run = _copy_with(char_rnn_run, tmp_path / "run")  # trained on a local text file
    assert inspect_folder(run).hub.license is None
    assert main(["push", str(run), "--repo-id", "tester/unlicensed"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no license for the model card" in err and "\n" not in err
    for hint in ("is unknown", "--license ID", "--set hub.license=apache-2.0", "lowercase"):
        assert hint in err, hint
    assert hub_server.requests == []  # refused before any upload

    # a dry run previews the card without a licence and says a push is refused
    assert main(["push", str(run), "--repo-id", "tester/x", "--dry-run", str(tmp_path / "d")]) == 0
    assert "a real push is refused" in " ".join(capsys.readouterr().out.split())
    preview = ModelCard.load(tmp_path / "d" / "model" / "README.md")
    assert preview.data.license is None and "| License | not set" in preview.text

    assert main(["push", str(run), "--repo-id", "tester/x", "--license", "Apache-2.0"]) == 2
    assert "--license: 'Apache-2.0' is not a Hub license id" in capsys.readouterr().err
    assert main(["push", str(run), "--repo-id", "tester/licensed", "--license", "cc-by-4.0"]) == 0
    card = ModelCard.load(hub_server.revision_dir("tester/licensed") / "README.md")
    assert (card.data.license, card.data.get("license_name")) == ("cc-by-4.0", None)
    assert "| License | `cc-by-4.0` |" in card.text


def test_public_domain_data_gives_other_with_its_name_and_link(char_rnn_run, tmp_path):
    run = _copy_with(char_rnn_run, tmp_path / "run", source="shakespeare")
    assert (
        main(["push", str(run), "--repo-id", "me/pd", "--space", "--dry-run", str(tmp_path / "d")])
        == 0
    )
    card = ModelCard.load(tmp_path / "d" / "model" / "README.md")
    assert (card.data.license, card.data.license_name, card.data.license_link) == (
        "other",
        "public-domain",
        PD_LINK,
    )
    row = f"| License | [`public-domain`]({PD_LINK}), the license of the training data (`shakespeare`) |"
    assert row in card.text
    space = SpaceCard.load(tmp_path / "d" / "space" / "README.md")
    assert (space.data.license, space.data.license_name) == ("other", "public-domain")


def test_recipe_push_to_hub_refuses_an_unknown_license_before_training(hub_server, tmp_path):
    recipe = write_recipe(
        tmp_path,
        training={"max_steps": 4, "eval_every": 4},
        evaluation={"splits": ["test"]},
        hub={"push_to_hub": True, "repo_id": "tester/no-license"},
    )
    with pytest.raises(RecipeError) as err:
        run_recipe(load_recipe(recipe))
    message = str(err.value)
    assert message.startswith("hub.license: not set and the license of data.source")
    assert "--set hub.license=" in message and "\n" not in message
    assert not (tmp_path / "run").exists()  # refused before training
    assert hub_server.files("tester/no-license") == []
