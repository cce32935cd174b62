"""The store's reviews: reads, updates, the tick's queries, and a batch of votes in one transaction.

Part of ``SqlStore`` (``sql``); the same statements on both engines. A review is its row (the document), its
history (``review_votes``), its delivery keys (``review_keys``) and each person's current vote (``review_ballots``).
``cast_votes`` casts a batch in one transaction of seven statements whatever its reviews, on PostgreSQL in two
round trips: lock the rows in key order (replicas casting batches that share reviews cannot deadlock), read every
next seq, known delivery key and count of what the votes vote, and the voters' current votes; then write votes,
keys, current votes, and the review's row if its document changed (a vote that decides nothing leaves it). A
review the batch may decide, or gets a modify, reads the agreeing votes too. Each review's rows are made in full
before any is written, so a review that cannot be cast fails alone, having written nothing. One commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from adapters.suggest import did_you_mean

import orjson

from ..review_deadlines import next_deadline
from ..review_records import REVIEW_FORMAT, Review, Vote
from ..reviews import Cast, VoteResult, agreement, agreements_needed, cast_votes
from .engines import DatabaseError
from .base import HOT_REVIEW_STATUSES, StoreError, UnknownReviewError
from .records import FEW_IDS, checked_key, encode, key_of, mutate_record, number, one_edit, run_key

__all__ = ["ReviewTables", "ORDER", "LATEST", "locked_archived", "ballot_rows", "review_rows", "write_reviews"]

T = TypeVar("T")
V = TypeVar("V")
#: Of ``review_rows``: the row (None: unchanged), the key, whether votes and keys are rewritten, the rows appended,
#: the current votes written, and whether those are all of them (else only their voters').
_Rows = tuple[tuple[Any, ...] | None, str, bool, list[tuple[Any, ...]], list[tuple[Any, ...]], list[Any], bool]
#: Of a review to cast on: the next seq, its votes' delivery keys stored, its tally, its voters' current votes.
_Stored = tuple[int, list[str], dict[str, int], dict[str, tuple[int, str]]]
_COLUMNS = ("key", "id", "run_key", "checkpoint_id", "status", "created_at", "num", "deadline", "archived", "doc")
_UPSERT = " ON CONFLICT (key) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
_BALLOT = " ON CONFLICT (review_key, who) DO UPDATE SET kind = excluded.kind, seq = excluded.seq, vote = excluded.vote"
#: Every modify's agreement ("MODIFY <digest>", ``reviews.agreement``), in the column's byte order.
_MODIFIES = "kind >= 'MODIFY ' AND kind < 'MODIFY!'"
_NEXT_SEQ = "(SELECT coalesce(max(seq) + 1, 0) FROM review_votes WHERE review_key = %s)"
#: Runs and reviews in creation order (demo-10 after demo-9), and latest first.
ORDER = 'created_at, num, id COLLATE "C"'
LATEST = 'created_at DESC, num DESC, id COLLATE "C" DESC'
#: A review's document without its request, on SQLite only (PostgreSQL's jsonb refuses some documents orjson writes).
_NO_REQUEST = "CASE WHEN json_valid(doc) THEN json_remove(doc, '$.request') ELSE doc END"


def _insert(cur: Any, into: str, rows: list[tuple[Any, ...]], tail: str = "") -> None:
    """``rows`` in one statement per 300 (a batch's votes), within every engine's limit of bound values."""
    for _, chunk in _chunks(rows, 300):
        values = ", ".join(["(" + ", ".join(["%s"] * len(chunk[0])) + ")"] * len(chunk))
        cur.execute(f"INSERT INTO {into} VALUES {values}{tail}", [value for row in chunk for value in row])


def ballot_rows(key: str, votes: Sequence[Vote]) -> list[tuple[Any, ...]]:
    """The rows of a review's current votes written whole: numbered below any seq a cast gives, in their order."""
    return list({v.who: (key, v.who, agreement(v), n - len(votes), encode(v.to_dict()))
                 for n, v in enumerate(votes)}.values())


def review_rows(review: Review, was_archived: bool | None, stored: tuple[int, int, int] | None = None,
                was: str | None = None) -> _Rows:
    """The review's row (None: its document is ``was``, as stored), and its votes and delivery keys after ``stored``
    (the next seq, and how many of its votes and keys are rows already; None: all, anew) as rows of their own: a
    vote appends a row to each, so neither the row nor a vote's cost grows with the votes. Its current votes: all,
    or (a ``tally``: it holds some, ``reviews.cast_votes``) each person's last in the history appended."""
    ended = review.status not in HOT_REVIEW_STATUSES
    if was_archived and not ended:
        raise StoreError(f"review {review.id} has ended and is archived; it cannot become {review.status!r} again"
                         " - start a new one")
    document = review.to_dict()
    del document["history"], document["delivery_keys"], document["votes"]
    key = checked_key("review", review.id)
    doc = encode(document)  # every other column of the row is the document's or the id's
    row = None if doc == was else (key, review.id, run_key(review.run_id), review.checkpoint_id, review.status,
                                   review.created_at, number(review.id), None if ended else next_deadline(review),
                                   ended, doc)
    seq, votes, keys = stored or (0, 0, 0)
    anew = stored is None or votes > len(review.history) or keys > len(review.delivery_keys)  # not appended to
    if anew:
        seq = votes = keys = 0
    history = [(key, seq + n, vote, encode(vote.to_dict())) for n, vote in enumerate(review.history[votes:])]
    whole = review.tally is None
    ballots = ballot_rows(key, review.votes) if whole else list(
        {vote.who: (key, vote.who, agreement(vote), n, text) for _, n, vote, text in history}.values())
    return (row, key, anew, [(key, n, text) for _, n, _, text in history],
            [(key, delivery_key) for delivery_key in dict.fromkeys(review.delivery_keys[keys:])], ballots, whole)


def write_reviews(cur: Any, written: list[_Rows]) -> None:
    """The rows of ``review_rows``, in one statement per table (and per 300 rows)."""
    _insert(cur, f"reviews ({', '.join(_COLUMNS)})", [row for row, *_ in written if row is not None], _UPSERT)
    for marks, chunk in _chunks([key for _, key, anew, *_ in written if anew]):
        cur.execute(f"DELETE FROM review_votes WHERE review_key IN ({marks})", chunk)
        cur.execute(f"DELETE FROM review_keys WHERE review_key IN ({marks})", chunk)
    for marks, chunk in _chunks([key for _, key, *_, whole in written if whole]):
        cur.execute(f"DELETE FROM review_ballots WHERE review_key IN ({marks})", chunk)
    _insert(cur, "review_votes (review_key, seq, vote)", [vote for *_, votes, _, _, _ in written for vote in votes])
    _insert(cur, "review_keys (review_key, delivery_key)", [key for *_, keys, _, _ in written for key in keys])
    _insert(cur, "review_ballots (review_key, who, kind, seq, vote)",
            [ballot for *_, ballots, _ in written for ballot in ballots], _BALLOT)


def _stored(cur: Any, batches: dict[str, Sequence[Cast]], lock: list[Any]) -> tuple[list[Any], dict[str, _Stored]]:
    """In one round trip, the rows of ``lock`` and of each review (key -> its casts): the next seq, which of its
    votes' delivery keys are stored, the count of current votes of each agreement voted (one statement of scalar
    probes per 250), and its voters' current votes (who -> (seq, vote); one statement: as probes, a text psycopg
    parses slowly). After ``lock``, never in it: on PostgreSQL a statement that waited for a lock sees the other
    tables as they were before."""
    probes: list[tuple[str, tuple[str, ...]]] = []
    asked, voters = [], []
    for key, casts in batches.items():
        keys = sorted({vote.delivery_key for vote, _ in casts if vote.delivery_key is not None})
        kinds = sorted({agreement(vote) for vote, _ in casts})
        voters += [(key, who) for who in sorted({vote.who for vote, _ in casts})]
        probes += [(_NEXT_SEQ, (key,)),
                   *(("EXISTS (SELECT 1 FROM review_keys WHERE review_key = %s AND delivery_key = %s)", (key, k))
                     for k in keys),
                   *(("(SELECT count(*) FROM review_ballots WHERE review_key = %s AND kind = %s)", (key, kind))
                     for kind in kinds)]
        asked.append((key, keys, kinds))
    counted = [("SELECT " + ", ".join(probe for probe, _ in chunk), [value for _, values in chunk for value in values])
               for _, chunk in _chunks(probes, 250)]
    voted = [(f"SELECT review_key, who, seq, vote FROM review_ballots WHERE (review_key, who) IN ({marks})",
              [value for pair in chunk for value in pair]) for marks, chunk in _chunks(voters, 250, "(%s, %s)")]
    results = cur.fetch_each(lock + counted + voted)
    answers = iter([answer for rows in results[len(lock):len(lock) + len(counted)] for answer in rows[0]])
    found: dict[str, _Stored] = {}
    for key, keys, kinds in asked:
        seq, known = int(next(answers)), [k for k in keys if next(answers)]
        tally = {kind: int(next(answers)) for kind in kinds}
        found[key] = (seq, known, tally, {})
    for key, who, seq, vote in (row for rows in results[len(lock) + len(counted):] for row in rows):
        found[key][3][who] = (int(seq), vote)
    return [row for rows in results[:len(lock)] for row in rows], found


def _agreeing(cur: Any, key: str, kinds: set[str], modifies: bool) -> dict[str, tuple[int, str]]:
    """who -> (seq, vote) of every current vote of ``kinds`` (and every modify) of the review of ``key``."""
    among = [f"kind IN ({', '.join(['%s'] * len(kinds))})"] * bool(kinds) + [_MODIFIES] * modifies
    if not among:
        return {}
    cur.execute(f"SELECT who, seq, vote FROM review_ballots WHERE review_key = %s AND ({' OR '.join(among)})",
                [key, *sorted(kinds)])
    return {who: (int(seq), vote) for who, seq, vote in cur.fetchall()}


def posted_at(review: Review, channel: str, context: Mapping[str, Any]) -> bool:
    """Does ``review`` have a post on ``channel`` whose message lives where ``context`` points?"""
    from adapters.channel import MessageRef  # here: it loads the engine's review types, which status does without

    for raw in review.posts:
        try:
            ref = MessageRef.from_dict(raw)
        except ValueError:  # a damaged post is where no answer belongs
            continue
        if ref.channel == channel and ref.matches(context):
            return True
    return False


def locked_archived(cur: Any, table: str, key: str) -> bool | None:
    """Whether the row of ``key`` is archived (None: no such row yet), locked for the write to come."""
    row = cur.execute(f"SELECT archived FROM {table} WHERE key = %s FOR UPDATE", (key,)).fetchone()
    return None if row is None else bool(row[0])


def _chunks(values: list[V], size: int = 500, mark: str = "%s") -> Iterator[tuple[str, list[V]]]:
    """(``IN`` placeholders, values) per ``size`` values, within every engine's limit of bound values."""
    for start in range(0, len(values), size):
        chunk = values[start:start + size]
        yield ", ".join([mark] * len(chunk)), chunk


class ReviewTables:
    """Reviews in the ``reviews`` table (mixed into ``SqlStore``, which gives the plumbing)."""

    engine: Any
    where: str
    _leased: Callable[..., list[Any]]
    _each: Callable[..., list[Any]]
    _decode: Callable[..., Any]

    def _unknown_review(self, review_id: str) -> UnknownReviewError:
        close = self._close_review_ids(review_id)
        hint = did_you_mean(review_id, close, n=3) or "; `loopbot status` lists the open reviews"
        return UnknownReviewError(f"no review {review_id!r}{hint}", close)

    def _close_review_ids(self, review_id: str) -> list[str]:
        with self.engine.read() as cur:
            if cur.execute("SELECT count(*) FROM reviews").fetchone()[0] <= FEW_IDS:
                return [row[0] for row in cur.execute("SELECT key FROM reviews").fetchall()]
            near = sorted(one_edit(review_id.strip().lower()))
            return [row[0] for marks, chunk in _chunks(near)
                    for row in cur.execute(f"SELECT key FROM reviews WHERE key IN ({marks})", chunk).fetchall()]

    def get_review(self, review_id: str, *, history: bool = True, votes: bool = True) -> Review:
        """The review; ``history=False``: without its history and delivery keys (both empty); ``votes=False`` too:
        without its current votes either (empty), its row alone, read in one statement whatever its votes and
        voters - who may answer, where it was posted, its outcome: enough to check a voter before casting."""
        key = key_of(review_id)
        if key is not None:
            with self.engine.snapshot() if history or votes else self.engine.read() as cur:  # one row: no snapshot
                row = cur.execute("SELECT key, doc FROM reviews WHERE key = %s", (key,)).fetchone()
                if row is not None:
                    return self._histories(cur, [row], strict=True, history=history, votes=votes)[0]
        raise self._unknown_review(review_id)

    def get_reviews(self, review_ids: Sequence[str]) -> dict[str, Review]:
        """``get_review(id, history=False, votes=False)`` of each id found, one statement per 500 (ids as given)."""
        keys = {review_id: key for review_id in review_ids if (key := key_of(review_id)) is not None}
        found: dict[str, Review] = {}
        for marks, chunk in _chunks(sorted(set(keys.values()))):
            rows = self._reviews_where(f"key IN ({marks})", tuple(chunk), history=False, votes=False)
            found.update((key_of(review.id) or "", review) for review in rows)
        return {review_id: found[key] for review_id, key in keys.items() if key in found}

    def _reviews_where(self, where: str, params: tuple[Any, ...] | dict[str, Any] = (), tail: str = "", *,
                       history: bool = True, request: bool = True, votes: bool = True) -> list[Review]:
        """The reviews ``where`` holds, as ``list_reviews`` says (``votes=False``: without their current votes
        either, in one query)."""
        doc = "doc" if request or self.engine.name != "sqlite" else _NO_REQUEST
        with self.engine.snapshot() if history or votes else self.engine.read() as cur:
            cur.execute(f"SELECT key, {doc} FROM reviews WHERE {where} ORDER BY {ORDER} {tail}", params)
            return self._histories(cur, cur.fetchall(), history=history, votes=votes)

    def _histories(self, cur: Any, rows: list[Any], *, strict: bool = False, history: bool = True,
                   votes: bool = True) -> list[Review]:
        """The reviews of ``rows`` (key, doc) with their current votes (or not: ``votes``) and histories and
        delivery keys (``history``, which needs the votes too), read in a query each per 500 reviews. ``strict``:
        a damaged row raises instead of being skipped."""
        parts: dict[str, dict[str, list[Any]]] = {"review_ballots": {}, "review_votes": {}, "review_keys": {}}
        reads = [("review_ballots", "vote", "seq"), ("review_votes", "vote", "seq"),
                 ("review_keys", "delivery_key", 'delivery_key COLLATE "C"')]
        for marks, chunk in _chunks([row[0] for row in rows]):
            for table, value, order in reads[:3 if history else int(votes)]:
                cur.execute(f"SELECT review_key, {value} FROM {table} WHERE review_key IN ({marks})"
                            f" ORDER BY review_key, {order}", chunk)
                for review_key, found in cur.fetchall():
                    parts[table].setdefault(review_key, []).append(found)

        def decode(row: tuple[Any, ...]) -> Review:
            votes, trail, keys = (parts[table].get(row[0], []) for table in parts)
            return self._with_rows(row, "[" + ",".join(trail) + "]", keys, "[" + ",".join(votes) + "]")

        return [decode(row) for row in rows] if strict else self._each(rows, decode, "reviews")

    def _with_rows(self, row: tuple[Any, ...], history: str = "[]", delivery_keys: Sequence[str] = (),
                   votes: str = "[]") -> Review:
        def fill(document: dict[str, Any]) -> None:
            document["history"], document["delivery_keys"] = orjson.loads(history), list(delivery_keys)
            document.setdefault("votes", orjson.loads(votes))  # kept by one the migration could not read: named

        return self._decode("reviews", row[0], row[1], REVIEW_FORMAT, Review.from_dict, fill=fill)

    def list_reviews(self, *, archived: bool = False, history: bool = True, request: bool = True) -> list[Review]:
        return self._reviews_where("true" if archived else "NOT archived", history=history, request=request)

    def update_review(self, review_id: str, mutate: Callable[[Review], T]) -> T:
        """Change a review in one transaction; one that becomes applied or failed is archived by the same write."""
        key = key_of(review_id)
        with self.engine.write() as cur:
            row = key and cur.execute("SELECT key, doc, archived FROM reviews WHERE key = %s FOR UPDATE",
                                      (key,)).fetchone()
            if not row:
                raise self._unknown_review(review_id)
            (seq,) = cur.execute(f"SELECT {_NEXT_SEQ}", (row[0],)).fetchone()
            (review,) = self._histories(cur, [row[:2]], strict=True)
            stored = (int(seq), len(review.history), len(review.delivery_keys))  # as read, before mutate
            written: list[_Rows] = []
            result = mutate_record("review", review_id, row[0], review, mutate,
                                   lambda: written.append(review_rows(review, bool(row[2]), stored, row[1])))
            write_reviews(cur, written)
            return result

    def cast_votes(self, batch: Mapping[str, Sequence[Cast]]) -> dict[str, list[VoteResult] | Exception]:
        """Every review's votes cast in one transaction; a review that fails fails alone (module doc)."""
        results: dict[str, list[VoteResult] | Exception] = {}
        todo = sorted((key_of(review_id) or "", review_id) for review_id in batch)  # "": no such key, not found
        try:
            self._cast_in_one(batch, todo, results)
        except DatabaseError as err:  # the commit failed: no vote of the batch was stored, none is acknowledged
            results.update({review_id: err for _, review_id in todo})
        return {review_id: results[review_id] for review_id in batch}

    def _cast_in_one(self, batch: Mapping[str, Sequence[Cast]], todo: list[tuple[str, str]],
                     results: dict[str, list[VoteResult] | Exception]) -> None:
        """Each review is cast on what ``reviews.cast_votes`` asks of it: its row, its votes' stored delivery
        keys, its voters' current votes, the count of each agreement voted, and the agreeing votes only when a
        decision may complete (or a modify needs its rivals). Casting costs the same at the 10th vote and the
        10,000th, and with 10 voters or 10,000: what it reads and decodes grows with the batch, not with the
        review (only the database's count of an agreement walks that agreement's index entries)."""
        with self.engine.write() as cur:
            lock = [(f'SELECT key, doc, archived FROM reviews WHERE key IN ({marks}) ORDER BY key COLLATE "C"'
                     " FOR UPDATE", chunk) for marks, chunk in _chunks([key for key, _ in todo if key])]
            locked, stored = _stored(cur, {key: batch[review_id] for key, review_id in todo if key}, lock)
            rows = {row[0]: row for row in locked}  # locked in the order sorted, chunk after chunk
            written: list[_Rows] = []
            for key, review_id in todo:
                try:
                    if key not in rows:
                        raise self._unknown_review(review_id)
                    seq, keys, tally, ballots = stored[key]
                    review = self._with_rows(rows[key], "[]", keys)
                    review.tally = tally
                    ballots.update(_agreeing(cur, key, *agreements_needed(review, batch[review_id])))
                    review.votes = [Vote.from_dict(orjson.loads(vote)) for _, vote in sorted(ballots.values())]
                    results[review_id] = cast = cast_votes(review, batch[review_id])
                    if any(result.accepted for result in cast):  # a vote changes the review only by being accepted
                        written.append(review_rows(review, bool(rows[key][2]), (seq, 0, len(keys)), rows[key][1]))
                except Exception as err:  # noqa: BLE001 - that review's failure, handed to its voters
                    if self.engine.fatal(err):  # the engine failed, not the review: the batch fails as one
                        raise
                    results[review_id] = err
            write_reviews(cur, written)

    def open_reviews(self, limit: int | None = None) -> list[Review]:
        tail = "" if limit is None else f"LIMIT {max(int(limit), 0)}"
        return self._reviews_where("NOT archived AND status = 'open'", (), tail, history=False, request=False)

    def open_reviews_posted_at(self, channel: str, context: Mapping[str, Any]) -> list[Review]:
        """The database picks the rows whose posts match (jsonb containment, or SQLite's json_each); the same
        check as ``posted_at`` confirms each; without history, keys and votes (the contract's docstring says why)."""
        if self.engine.name == "postgres":
            wanted = json.dumps([{"channel": channel, "data": dict(context)}])
            found = self._reviews_where("NOT archived AND status = 'open' AND (doc::jsonb -> 'posts') @> %s::jsonb",
                                        (wanted,), history=False, votes=False)
        else:
            tests = ["json_extract(p.value, '$.channel') = %(channel)s"]
            params: dict[str, Any] = {"channel": channel}
            for n, (name, value) in enumerate(sorted(context.items())):
                if isinstance(value, (str, int)) and not isinstance(value, bool) and '"' not in name:
                    tests.append(f"json_extract(p.value, %(path{n})s) = %(value{n})s")
                    params[f"path{n}"], params[f"value{n}"] = f'$.data."{name}"', value
            found = self._reviews_where(
                "NOT archived AND status = 'open' AND EXISTS (SELECT 1 FROM json_each(reviews.doc, '$.posts') AS p"
                f" WHERE {' AND '.join(tests)})", params, history=False, votes=False)
        return [review for review in found if posted_at(review, channel, context)]

    def _leased_reviews(self, condition: str, params: dict[str, Any]) -> list[Review]:
        if not self.engine.leases:  # nothing to lease: the rows and their votes of one moment
            return self._reviews_where("NOT archived AND " + condition, params)
        keys = [row[0] for row in self._leased("reviews", "key", "NOT archived AND " + condition, params)]
        found: list[Review] = []
        for marks, chunk in _chunks(keys):  # leased: read again with their votes
            found += self._reviews_where(f"key IN ({marks})", tuple(chunk))
        return sorted(found, key=lambda review: (review.created_at, number(review.id), review.id))  # ORDER

    def decided_reviews(self) -> list[Review]:
        """Decided reviews to apply (on PostgreSQL leased to this replica, so one replica applies each)."""
        return self._leased_reviews("status = 'decided'", {})

    def due_reviews(self, now: datetime) -> list[Review]:
        """Open reviews with a deadline due at ``now`` (on PostgreSQL leased to this replica)."""
        return self._leased_reviews("deadline <= %(now)s", {"now": now})

    def review_for_run(self, run_id: str, checkpoint_id: str | None = None) -> Review | None:
        """The run's latest review (at ``checkpoint_id`` if given); a damaged row is skipped like a listing's."""
        with self.engine.snapshot() as cur:
            rows = cur.execute("SELECT key, doc FROM reviews WHERE run_key = %(run)s AND (%(cp)s::text IS NULL"
                               f" OR checkpoint_id = %(cp)s) ORDER BY {LATEST}",
                               {"run": run_key(run_id), "cp": checkpoint_id}).fetchall()
            for row in rows:  # the latest that is not damaged, with its votes of the same moment
                found = self._histories(cur, [row])
                if found:
                    return found[0]
        return None

    def counts(self) -> dict[str, Any]:
        with self.engine.read() as cur:
            cur.execute("SELECT status, count(*) FROM runs WHERE NOT archived GROUP BY status ORDER BY status")
            runs = {status: int(n) for status, n in cur.fetchall()}
            cur.execute("SELECT status, count(*) FROM reviews WHERE NOT archived GROUP BY status")
            reviews = {status: int(n) for status, n in cur.fetchall()}
            pending = int(cur.execute("SELECT count(*) FROM outbox").fetchone()[0])
        return {"runs": runs, "open_reviews": reviews.get("open", 0), "decided_reviews": reviews.get("decided", 0),
                "outbox_pending": pending}

    def outbox_backlog(self) -> dict[str, int]:
        """Pending outbox tasks by channel (a channel with none is absent), from the channel index."""
        with self.engine.read() as cur:
            cur.execute("SELECT channel, count(*) FROM outbox GROUP BY channel")
            return {channel: int(n) for channel, n in cur.fetchall()}
