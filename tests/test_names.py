"""The one vocabulary: every policy has the papers' name and a fixed colour; legends sort numbers by value."""

from hetsched.ui.names import VOCABULARY, color, display_name, display_names, legend_order, natural_sorted
from hetsched.core.registry import policy_names


def test_every_registered_policy_has_a_display_name_and_a_distinct_colour():
    assert set(policy_names()) <= set(VOCABULARY)
    names = [d for d, _ in VOCABULARY.values()]
    colours = [c for _, c in VOCABULARY.values()]
    assert len(set(names)) == len(names) and len(set(colours)) == len(colours)


def test_papers_names_for_registry_names_aliases_and_composed_policies():
    assert display_name("max_min_fairness_perf") == display_name("gavel") == "Gavel"
    assert display_name("max_min_fairness") == "LAS" and display_name("max_min_fairness_packed") == "Gavel w/ SS"
    assert display_name("finish_time_fairness") == "Themis" and display_name("min_total_duration") == "OSSP"
    assert display_name("FIFO+tune") == "FIFO (Synergy-TUNE)" and display_name("LAS+fair") == "LAS (Proportional)"
    assert display_name("TETRIS") == display_name("TETRIS+greedy") == "TETRIS (Greedy)"    # one pipeline, one name
    assert display_name("max_min_fairness_perf+tune") == "Gavel (Synergy-TUNE)"
    assert display_name("SS, oracle") == "SS, oracle"           # not a policy: unchanged


def test_two_policies_never_share_a_label():
    """Gavel's LAS allocation and Synergy's LAS ordering both read "LAS (Proportional)" with the fair placement
    (and Gavel's FIFO and Synergy's FIFO with TUNE): side by side, each gets its registry name."""
    names = display_names(["gavel_las+fair", "LAS+fair", "gavel", "gavel_fifo+tune", "FIFO+tune", "gavel"])
    assert names == {"gavel_las+fair": "LAS (Proportional) [gavel_las+fair]",
                     "LAS+fair": "LAS (Proportional) [LAS+fair]",
                     "gavel": "Gavel", "gavel_fifo+tune": "FIFO (Synergy-TUNE) [gavel_fifo+tune]",
                     "FIFO+tune": "FIFO (Synergy-TUNE) [FIFO+tune]"}
    assert display_names(["LAS+fair", "gavel"]) == {"LAS+fair": "LAS (Proportional)", "gavel": "Gavel"}


def test_colours_are_fixed_and_composed_policies_differ_from_their_base():
    assert color("gavel") == color("max_min_fairness_perf") == VOCABULARY["max_min_fairness_perf"][1]
    assert color("max_min_fairness_perf+tune") != color("max_min_fairness_perf")
    assert len({color(f"FIFO+{m}") for m in ("fair", "tune", "opt")}) == 3


def test_numeric_legends_sort_by_value():
    assert natural_sorted(["rounds of 720 s", "rounds of 2880 s", "rounds of 360 s", "rounds of 1440 s"]) == [
        "rounds of 360 s", "rounds of 720 s", "rounds of 1440 s", "rounds of 2880 s"]
    assert natural_sorted(["10", "20", "40", "5", "80"]) == ["5", "10", "20", "40", "80"]
    assert legend_order(["OSSP", "Gavel", "Shockwave", "LAS"]) == ["Shockwave", "LAS", "Gavel", "OSSP"]
