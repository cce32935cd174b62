from adapters.suggest import did_you_mean


def test_closest_choice_is_quoted_in_one_wording() -> None:
    assert did_you_mean("aprove", ["approve", "reject"]) == ' - did you mean "approve"?'


def test_case_is_ignored_and_the_choice_keeps_its_own_spelling() -> None:
    assert did_you_mean("TRIAGE-71", ["triage-17", "Triage-71"]) == ' - did you mean "Triage-71"?'


def test_several_matches_are_joined_with_or_best_first() -> None:
    hint = did_you_mean("triage-17", ["triage-1", "other", "triage-17x"], n=2)
    assert hint == ' - did you mean "triage-17x" or "triage-1"?'


def test_nothing_close_gives_no_hint() -> None:
    assert did_you_mean("zzz", ["approve", "reject"]) == ""
    assert did_you_mean("approve", []) == ""
