"""GitHubClient's calls and error mapping, with ``responses`` standing in for api.github.com.

PyGithub requests ``https://api.github.com:443/...`` with the default base
URL, so the mocks match the port optionally; URLs inside answers (``Link``)
carry no ``:443`` (protocols.md, trap 2).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
import requests
import responses
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from adapters.channel import ChannelError
from adapters.github.client import GitHubClient, make_github

API = "https://api.github.com"


def url(path: str) -> re.Pattern[str]:
    return re.compile(r"https://api\.github\.com(:443)?" + re.escape(path) + r"(\?.*)?$")


def user(login: str) -> dict[str, object]:
    return {"login": login, "id": 1, "type": "User", "url": f"{API}/users/{login}"}


def comment(comment_id: int, body: str, login: str = "loopbot") -> dict[str, object]:
    return {"id": comment_id, "body": body, "user": user(login), "created_at": "2026-01-02T09:00:00Z",
            "updated_at": "2026-01-02T09:00:00Z", "html_url": f"https://github.com/octo/ops/issues/42#c{comment_id}",
            "url": f"{API}/repos/octo/ops/issues/comments/{comment_id}",
            "issue_url": f"{API}/repos/octo/ops/issues/42"}


@pytest.fixture
def client() -> GitHubClient:
    return GitHubClient(make_github(token="ghp_secret"), clock=lambda: 1_000.0)


@responses.activate
def test_create_comment_posts_the_body_with_the_token(client: GitHubClient) -> None:
    responses.post(url("/repos/octo/ops/issues/42/comments"), json=comment(7, "hello"), status=201)
    made = client.create_comment("octo/ops", 42, "hello")
    assert (made.id, made.body, made.login) == (7, "hello", "loopbot")
    (call,) = responses.calls
    assert json.loads(call.request.body) == {"body": "hello"}
    assert call.request.headers["Authorization"] == "token ghp_secret"


@responses.activate
def test_edit_react_label_unlabel(client: GitHubClient) -> None:
    responses.patch(url("/repos/octo/ops/issues/comments/7"), json=comment(7, "new"))
    responses.post(url("/repos/octo/ops/issues/comments/7/reactions"), json={"id": 1, "content": "rocket"}, status=201)
    responses.post(url("/repos/octo/ops/issues/42/labels"), json=[{"name": "loopbot:awaiting-review"}])
    responses.delete(url("/repos/octo/ops/issues/42/labels/loopbot%3Aawaiting-review"), json=[])
    responses.delete(url("/repos/octo/ops/issues/42/labels/gone"), json={"message": "Label does not exist"},
                     status=404)
    client.edit_comment("octo/ops", 7, "new")
    client.add_reaction("octo/ops", 7, "rocket")
    client.add_labels("octo/ops", 42, "loopbot:awaiting-review")
    client.remove_label("octo/ops", 42, "loopbot:awaiting-review")
    client.remove_label("octo/ops", 42, "gone")  # already gone: fine
    bodies = [json.loads(c.request.body) if c.request.body else None for c in responses.calls]
    assert bodies[:3] == [{"body": "new"}, {"content": "rocket"}, {"labels": ["loopbot:awaiting-review"]}]


@responses.activate
def test_list_comments_follows_link_pages(client: GitHubClient) -> None:
    link = f'<{API}/repos/octo/ops/issues/42/comments?per_page=100&page=2>; rel="next", ' \
           f'<{API}/repos/octo/ops/issues/42/comments?per_page=100&page=2>; rel="last"'
    responses.get(url("/repos/octo/ops/issues/42/comments"), json=[comment(1, "a")], headers={"Link": link},
                  match=[responses.matchers.query_param_matcher({"per_page": "100"})])
    responses.get(url("/repos/octo/ops/issues/42/comments"), json=[comment(2, "b")],
                  match=[responses.matchers.query_param_matcher({"per_page": "100", "page": "2"})])
    assert [c.id for c in client.list_comments("octo/ops", 42)] == [1, 2]


@responses.activate
def test_list_issues_skips_pull_requests(client: GitHubClient) -> None:
    issue = {"number": 3, "title": "t", "body": "<!-- loopbot:run=r1 -->", "labels": [{"name": "loopbot"}],
             "state": "open"}
    responses.get(url("/repos/octo/ops/issues"), json=[issue, {**issue, "number": 4, "pull_request": {}}])
    assert [i.number for i in client.list_issues("octo/ops", "loopbot")] == [3]
    assert "labels=loopbot" in responses.calls[0].request.url and "state=all" in responses.calls[0].request.url


@responses.activate
def test_permission_prefers_the_role_name(client: GitHubClient) -> None:
    responses.get(url("/repos/octo/ops/collaborators/mo/permission"),
                  json={"permission": "write", "role_name": "maintain", "user": user("mo")})
    responses.get(url("/repos/octo/ops/collaborators/nobody/permission"), json={"message": "Not Found"}, status=404)
    assert client.collaborator_permission("octo/ops", "mo") == "maintain"
    assert client.collaborator_permission("octo/ops", "nobody") == "none"


@pytest.mark.parametrize(
    ("status", "headers", "message", "retry_after", "permanent"),
    [
        (403, {"Retry-After": "45"}, "You have exceeded a secondary rate limit.", 45.0, False),
        (403, {}, "You have exceeded a secondary rate limit.", 60.0, False),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1300"}, "API rate limit exceeded", 300.0, False),
        (429, {}, "Too many", 60.0, False),
        (429, {"Retry-After": "inf"}, "Too many", 600.0, False),  # clamped to the outbox's longest backoff
        (429, {"Retry-After": "1e20"}, "Too many", 600.0, False),
        (429, {"Retry-After": "nan"}, "Too many", 60.0, False),  # no usable wait: the default
        (429, {"Retry-After": "-5"}, "Too many", 0.0, False),
        (403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1e20"}, "API rate limit exceeded", 600.0, False),
        (500, {}, "boom", None, False),
        (502, {}, "bad gateway", None, False),
        (404, {}, "Not Found", None, True),
        (410, {}, "This issue was deleted", None, True),
        (422, {}, "Validation Failed", None, True),
        (403, {}, "Resource not accessible by integration", None, True),
    ],
)
@responses.activate
def test_errors_map_to_channel_errors(client: GitHubClient, status: int, headers: dict[str, str], message: str,
                                      retry_after: float | None, permanent: bool) -> None:
    responses.post(url("/repos/octo/ops/issues/42/comments"), json={"message": message}, status=status,
                   headers=headers)
    with pytest.raises(ChannelError) as caught:
        client.create_comment("octo/ops", 42, "x")
    assert caught.value.retry_after == retry_after
    assert caught.value.permanent is permanent
    assert len(responses.calls) == 1  # never retried inside the client


@pytest.mark.parametrize("reset", ["inf", "nan"])
@responses.activate
def test_a_reset_time_pygithub_cannot_read_is_a_retryable_error(client: GitHubClient, reset: str) -> None:
    responses.post(url("/repos/octo/ops/issues/42/comments"), json={"message": "API rate limit exceeded"},
                   status=403, headers={"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset})
    with pytest.raises(ChannelError) as caught:
        client.create_comment("octo/ops", 42, "x")
    assert not caught.value.permanent and "unreadable answer" in str(caught.value)


@responses.activate
def test_a_connection_error_is_retryable(client: GitHubClient) -> None:
    responses.post(url("/repos/octo/ops/issues/42/comments"), body=requests.ConnectionError("reset by peer"))
    with pytest.raises(ChannelError) as caught:
        client.create_comment("octo/ops", 42, "x")
    assert not caught.value.permanent


@responses.activate
def test_conditional_get_304(client: GitHubClient) -> None:
    responses.get(url("/repos/octo/ops/issues/42/comments"), status=304, headers={"ETag": '"abc"'},
                  match=[responses.matchers.header_matcher({"If-None-Match": '"abc"'})])
    page = client.get_json("/repos/octo/ops/issues/42/comments", {"since": "2026-01-01T00:00:00Z"}, etag='"abc"')
    assert page.status == 304 and page.data is None


@responses.activate
def test_app_installation_auth_fetches_and_uses_an_installation_token() -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    responses.post(url("/app/installations/77/access_tokens"), json={"token": "ghs_install", "expires_at": expires},
                   status=201)
    responses.post(url("/repos/octo/ops/issues/42/comments"), json=comment(7, "hi"), status=201)
    client = GitHubClient(make_github(app_id=123, private_key=pem, installation_id=77))
    client.create_comment("octo/ops", 42, "hi")
    client.create_comment("octo/ops", 42, "hi")
    token_calls = [c for c in responses.calls if "access_tokens" in c.request.url]
    assert len(token_calls) == 1  # cached until shortly before it expires
    assert token_calls[0].request.headers["Authorization"].startswith("Bearer ")
    assert token_calls[0].request.headers["Accept"] == "application/vnd.github+json"  # not the machine-man preview
    assert responses.calls[-1].request.headers["Authorization"] == "token ghs_install"
    assert {c.request.headers["X-GitHub-Api-Version"] for c in responses.calls} == {"2022-11-28"}


@responses.activate
def test_every_request_names_the_api_version(client: GitHubClient) -> None:
    responses.post(url("/repos/octo/ops/issues/42/comments"), json=comment(7, "hi"), status=201)
    responses.get(url("/repos/octo/ops/issues/42/comments"), json=[])
    responses.get(url("/user"), json=user("loopbot"))
    responses.post(url("/repos/octo/ops/issues/42/labels"), json=[])
    client.create_comment("octo/ops", 42, "hi")
    client.list_comments("octo/ops", 42)
    client.me()
    client.add_labels("octo/ops", 42, "a", "b")
    assert [c.request.headers.get("X-GitHub-Api-Version") for c in responses.calls] == ["2022-11-28"] * 4
    assert json.loads(responses.calls[-1].request.body) == {"labels": ["a", "b"]}


def test_no_credentials_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="github.token"):
        make_github()


@responses.activate
def test_me_is_an_error_while_get_user_says_no_login(client: GitHubClient) -> None:
    responses.get(url("/user"), json={"message": "Resource not accessible by integration"}, status=403)
    with pytest.raises(ChannelError, match="403"):
        client.me()  # not None: an unknown identity must never pass for "no bot user"
