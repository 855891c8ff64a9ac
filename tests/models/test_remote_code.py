"""A saved folder loads and generates where hfattn is not installed (trust_remote_code)."""

import json

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.helpers.fresh_env import LOAD_SCRIPT, greedy_and_sampled, run_offline_without_hfattn

pytestmark = pytest.mark.slow


def test_folder_loads_without_hfattn_and_generates_the_same_text(
    char_rnn_run, fresh_python, tmp_path
):
    config = json.loads((char_rnn_run / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_char_rnn.CharRNNConfig",
        "AutoModelForCausalLM": "modeling_char_rnn.CharRNNForCausalLM",
    }
    model = AutoModelForCausalLM.from_pretrained(char_rnn_run).eval()
    expected = greedy_and_sampled(model, AutoTokenizer.from_pretrained(char_rnn_run))

    loaded = run_offline_without_hfattn(fresh_python, LOAD_SCRIPT, str(char_rnn_run), cwd=tmp_path)
    assert loaded["module"].startswith("transformers_modules")  # the folder's own source
    assert loaded["greedy"] == expected["greedy"] and loaded["sampled"] == expected["sampled"]
