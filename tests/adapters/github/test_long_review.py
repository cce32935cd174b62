"""A 70 kB review whose old cut started a line with ``/yes``: no comment loopbot posts holds a vote (#23, finding 3).

The review is cut to GitHub's cap on line ends, and command-looking lines are
escaped after cutting, so even with its own login unknown the bot cannot
read its own comment as a person's ``/yes``.
"""

from __future__ import annotations

import dataclasses

import pytest

from adapters.channel import Target
from adapters.command_error import CommandError
from adapters.commands import parse_comment
from adapters.github.channel import GitHubChannel
from tests.fakes.github_api import FakeGitHub

from .conftest import REPO, make_post


def votes_in(body: str) -> list[object]:
    try:
        return list(parse_comment(body))
    except CommandError as err:  # an invalid command line is a command line too
        return [err]


@pytest.mark.parametrize("pad", range(5))  # one of five alignments put "/yes" first on the old cut's line
def test_a_70_kb_review_posts_no_line_that_counts_as_a_vote(channel: GitHubChannel, fake: FakeGitHub,
                                                            pad: int) -> None:
    post = make_post()
    post.request.context["proposal"] = "/yes " * 14_000 + "z" * pad  # 70 kB in one table cell
    ref = channel.post_request(Target("github", repository=REPO, issue=42), post)
    decided = dataclasses.replace(post, status="decided")
    channel.post_update(ref, decided, "Decided: APPROVE by github:alice at 2026-01-02T10:00:00+00:00 - /yes\n/yes")
    channel.post_update(ref, decided, "Run triage-run-4 completed. Result: /yes")
    bodies = [comment["body"] for comment in fake.comments_on(REPO, 42)]
    assert bodies and all(len(body) <= 65_536 for body in bodies)
    assert [votes_in(body) for body in bodies] == [[] for _ in bodies]
    assert "/yes /yes" in bodies[0]  # the review is there, shown as written
