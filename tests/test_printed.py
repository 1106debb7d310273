"""The printed-number comparison itself: a boundary value passes either way, a wrong digit fails."""

from tests.printed import Printed


def test_a_value_on_a_rounding_boundary_matches_either_rounding() -> None:
    # 3.35835 exactly between 3.3583 and 3.3584: a report may print either (last bits differ by CPU)
    assert Printed("{:.4f}", 3.35835) == "3.3583"
    assert Printed("{:.4f}", 3.35835) == "3.3584"
    assert Printed("{:.4f} [{:.4f}, {:.4f}]", 1.0, 0.358349, 1.64165) == "1.0000 [0.3583, 1.6417]"


def test_a_wrong_number_or_wrong_words_fail() -> None:
    assert Printed("{:.4f}", 3.358349) != "3.3585"  # off by more than half a unit
    assert Printed("{:.4f}", 3.358349) != "3.358"  # another precision than the template's
    assert Printed("{:.4f} [{:.4f}, {:.4f}]", 1.0, 0.5, 1.5) != "1.0000 (0.5000, 1.5000)"
    assert Printed("{:.4f} (n=1, no CI)", -0.01) != "-0.0100 (n=2, no CI)"
    assert Printed("{:.4f} (n=1, no CI)", -0.01) == "-0.0100 (n=1, no CI)"
