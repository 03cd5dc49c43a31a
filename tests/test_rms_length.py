import numpy as np
import pytest

from prbench.prompts import PairRequest, ScoreRequest
from prbench.rms import load_reward_model


def test_length_words_and_chars():
    reqs = [ScoreRequest("Q?", "one two three"), ScoreRequest("Q?", "a"), ScoreRequest("Q?", "")]
    words = load_reward_model({"name": "len", "kind": "length"}).score(reqs)
    assert words.scores.tolist() == [3.0, 1.0, 0.0] and words.failures == 0
    chars = load_reward_model({"name": "len", "kind": "length", "length_unit": "chars"}).score(reqs)
    assert chars.scores.tolist() == [13.0, 1.0, 0.0]


def test_length_compare_ties_and_bad_unit():
    rm = load_reward_model({"name": "len", "kind": "length"})
    out = rm.compare([PairRequest("Q?", "a b c", "a b"), PairRequest("Q?", "a b", "c d"),
                      PairRequest("Q?", "x", "y z")])
    np.testing.assert_array_equal(out.prefs, [1.0, 0.5, 0.0])
    with pytest.raises(ValueError, match=r"reward_models\.len\.length_unit"):
        load_reward_model({"name": "len", "kind": "length", "length_unit": "tokens"})
