"""A loop says what it proposes, as data (issue 18, item 1): checked on construction, JSON-safe, rendered safely."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from loop_engine import ChangeList, Link, Proposal, Table, Text
from loop_engine.checkpoint import CheckpointConfig, CheckpointTrigger, HumanCheckpoint, ReviewRequest
from loop_engine.components import ListPlanner
from loop_engine.engine import LoopEngine
from loop_engine.config import LoopConfig
from loop_engine.errors import CorruptStateError
from loop_engine.persistence import LoopStatePersistence, PersistenceConfig
from loop_engine.proposal import proposal_from_dict
from loop_engine.deserialization import state_from_dict
from loop_engine.serialization import encode_state, state_to_dict
from loop_engine.types import ComponentType, LoopContext, LoopState, LoopStatus

T0 = datetime(2026, 8, 4, 16, 51, 32, 180204)


def sample() -> Proposal:
    return Proposal(
        "Approve to apply 2 label changes to octo/ops",
        [
            Text("Two issues *changed* since the last run.", title="Overview"),
            Table(["Issue", "Title", "Add"], [["#1", "Crash | on save\nreally", "P1"], ["#2", "Docs", "P2"]],
                  title="Changes"),
            ChangeList(["#1: add P1", "#2: add P2"], title="What approving does"),
            Link("https://github.com/octo/ops/issues?q=is%3Aopen", "open issues"),
        ],
    )


def big_proposal(rows: int = 5_000) -> Proposal:
    table = Table(["Issue", "Title", "Labels to add", "Why"],
                  [[f"#{n}", f"title {n} | with a pipe\nand a line", "P1, stale", '"crash" in the title']
                   for n in range(rows)])
    return Proposal(f"Approve to apply {rows} label changes to octo/ops", [table])


def checkpoint() -> HumanCheckpoint:
    return HumanCheckpoint(CheckpointConfig(save_checkpoints=False), now=lambda: T0)


# --- construction -----------------------------------------------------------------


def test_sections_keep_lists_as_tuples_so_equal_data_is_equal_and_hashable() -> None:
    a, b = sample(), sample()
    assert a == b and hash(a) == hash(b)
    table = a.sections[1]
    assert isinstance(table, Table) and table.rows[0] == ("#1", "Crash | on save\nreally", "P1")


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Proposal(""), "Proposal.summary: must not be empty"),
    (lambda: Proposal("two\nlines"), "Proposal.summary: must be one line"),
    (lambda: Proposal("ok", ["just text"]), r"Proposal.sections\[0\]: expected Text, Table, ChangeList or Link"),
    (lambda: Table(["A", "B"], [["1", "2"], ["3"]]), r"Table.rows\[1\]: 1 cell\(s\) for 2 column\(s\)"),
    (lambda: Table(["A"], [[12]]), r"Table.rows\[0\]\[0\]: expected a str, got int"),
    (lambda: Table([], []), "at least one column"),
    (lambda: Table(["A\nB"], []), r"Table.columns\[0\]: must be one line"),
    (lambda: Table(["A"], "abc"), "Table.rows: expected a list of rows"),
    (lambda: ChangeList([]), "at least one item"),
    (lambda: ChangeList(["a\nb"]), r"ChangeList.items\[0\]: must be one line"),
    (lambda: Link("javascript:alert(1)"), "Link.url: expected an absolute http"),
    (lambda: Link("https://x.test/a b"), "Link.url"),
    (lambda: Text("   "), "Text.markdown: must not be empty"),
])
def test_a_wrong_proposal_fails_where_it_is_built_naming_the_field(make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises((TypeError, ValueError), match=message):
        make()


def test_request_review_refuses_details_that_are_not_a_proposal() -> None:
    with pytest.raises(TypeError, match=r"request_review\(details=...\) takes a loop_engine.proposal.Proposal"):
        checkpoint().request_review("look", details={"summary": "x"})  # type: ignore[arg-type]


# --- JSON -----------------------------------------------------------------------


def test_a_proposal_round_trips_through_json() -> None:
    data = json.loads(json.dumps(sample().to_dict()))
    assert proposal_from_dict(data) == sample()
    assert [s["kind"] for s in data["sections"]] == ["text", "table", "list", "link"]


@pytest.mark.parametrize(("data", "message"), [
    ([], "proposal: expected a JSON object"),
    ({"summary": "x", "sections": [{"kind": "chart"}]}, r"proposal.sections\[0\].kind: expected one of"),
    ({"summary": "x", "sections": [{"kind": "table", "columns": ["A"], "rows": [["1", "2"]]}]},
     r"proposal.sections\[0\]: Table.rows\[0\]: 2 cell"),
    ({"summary": 3}, "proposal: Proposal.summary: expected a str"),
])
def test_damaged_proposal_data_names_the_place(data: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        proposal_from_dict(data)


def test_a_request_without_a_proposal_stores_no_proposal_key() -> None:
    """Old records and requests without one read and write as they always did."""
    request = ReviewRequest("checkpoint_0001", CheckpointTrigger.ON_EXTERNAL_REQUEST, timestamp=T0)
    assert "proposal" not in request.to_dict()
    assert ReviewRequest.from_dict(request.to_dict()).proposal is None


def test_a_damaged_proposal_in_a_snapshot_is_a_corrupt_state() -> None:
    cp = checkpoint()
    cp.request_review("look", details=sample())
    state = LoopState()
    cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    data = state_to_dict(state)
    data["pending_review"]["proposal"]["sections"][1]["rows"][0] = ["only one"]
    with pytest.raises(CorruptStateError, match=r"review request.proposal.sections\[1\]: Table.rows\[0\]"):
        state_from_dict(data)


# --- through the checkpoint and the engine -------------------------------------------


def test_request_review_details_travel_in_the_request_and_only_there() -> None:
    cp = checkpoint()
    cp.request_review("first", details=sample())
    cp.request_review("second")
    state = LoopState()
    first = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    second = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST)
    assert (first.context["reason"], first.proposal) == ("first", sample())
    assert (second.context["reason"], second.proposal) == ("second", None)


class ProposingActor:
    def __init__(self, checkpoint: HumanCheckpoint, proposal: Proposal) -> None:
        self.checkpoint, self.proposal = checkpoint, proposal

    def execute(self, step, observations, context):  # type: ignore[no-untyped-def]
        if step.id == "step_1":
            self.checkpoint.request_review("apply the labels", details=self.proposal)
        return {"done": step.id}


async def test_a_5000_row_proposal_survives_the_engine_snapshot_save_and_load(tmp_path: Path) -> None:
    proposal = big_proposal()
    cp = checkpoint()
    persistence = LoopStatePersistence(PersistenceConfig(state_dir=str(tmp_path), format="json"))
    engine = LoopEngine(LoopConfig(), checkpoint=cp, persistence=persistence)
    engine.register_component(ComponentType.PLANNER, ListPlanner(["propose", "apply"]))
    engine.register_component(ComponentType.ACTOR, ProposingActor(cp, proposal))
    result = await engine.run(LoopContext(goal="label"), trace_id="big-1")
    assert result.status is LoopStatus.PAUSED and result.review_request is not None
    assert result.review_request.proposal == proposal
    loaded = persistence.load("big-1")
    assert loaded.pending_review == engine.state.pending_review
    assert loaded.pending_review is not None and loaded.pending_review.proposal == proposal
    assert state_from_dict(json.loads(encode_state(engine.state))["state"]) == engine.state


# --- markdown -------------------------------------------------------------------------


def test_the_proposal_comes_after_every_section_a_request_always_had() -> None:
    cp = checkpoint()
    state = LoopState()
    cp.request_review("apply")
    plain = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST).to_markdown()
    cp.request_review("apply", details=sample())
    state = LoopState()
    text = cp.present_for_review(state, CheckpointTrigger.ON_EXTERNAL_REQUEST).to_markdown()
    assert text.startswith(plain.rstrip("\n") + "\n\n## Proposal\n\n**Approve to apply 2 label changes to octo/ops**\n")
    assert "### Changes" in text and "- #1: add P1" in text
    assert "[open issues](https://github.com/octo/ops/issues?q=is%3Aopen)" in text


def _cells(line: str) -> list[str]:
    """The cells of a markdown table row, split on the pipes a renderer would split on (not ``\\|``)."""
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


def test_a_pipe_or_a_line_break_in_a_cell_cannot_break_the_table() -> None:
    lines = Proposal("Approve", [big_proposal(3).sections[0]]).rendered_lines()
    table = [line for line in lines if line.startswith("|")]
    assert len(table) == 2 + 3  # header, rule, one line per row
    assert all(len(_cells(line)) == 4 for line in table)
    assert _cells(table[2])[1].strip() == "title 0 \\| with a pipe<br>and a line"


def test_loop_text_cannot_render_html_or_links_of_its_own() -> None:
    hostile = Proposal("<!-- loopbot:review -->", [
        Text("<script>x</script>\n<!-- loopbot:review demo-1 -->"),
        ChangeList(["<b>bold</b>"]),
        Link("https://x.test/", "a](https://evil.test) ["),
    ])
    text = "\n".join(hostile.rendered_lines())
    assert "<" not in text.replace("&lt;", "")
    assert text.splitlines()[-1] == "[a\\](https://evil.test) \\[](https://x.test/)"  # its brackets are text


def test_a_texts_markdown_stays_inside_its_section() -> None:
    """No heading beside the request's own, and no open code fence swallowing what follows the proposal."""
    lines = Proposal("Approve", [Text("# Human Checkpoint: fake\n  ## Votes\nsee #12\n```\nunclosed")]).rendered_lines()
    body = lines[lines.index("**Approve**") + 2:]
    assert body == ["\\# Human Checkpoint: fake", "  \\## Votes", "see #12", "```", "unclosed", "```"]
