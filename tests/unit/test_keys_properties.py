"""Properties of the key layout (``keys.py``), for any ids hypothesis can think of.

Every id reaches a key through ``encode_segment``; these tests check what the module and
``docs/layout.md`` promise of it (one safe segment, injective, decodable when it is not a
hash) and the key ranges the saver really queries: ``begins_with(sk, ns_prefix_sk)``,
``BETWEEN checkpoint_sk AND writes_upper_sk``, ``BETWEEN ns_prefix_sk AND checkpoint_sk``
and the ``#w#`` split that finds a writes item's checkpoint.
"""

from __future__ import annotations

import hashlib
import re
import string
from urllib.parse import unquote

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from langgraph_s3.core.collect import _OBJECT_KEY
from langgraph_s3.core.schema import OWNER_SK
from langgraph_s3.errors import InvalidConfigError
from langgraph_s3.keys import Layout, check_checkpoint_id, encode_segment, normalize_prefix

SETTINGS = settings(max_examples=100, deadline=None, derandomize=True, database=None)

SAFE = frozenset(string.ascii_letters + string.digits + "-_:")
SEGMENT_CHARS = SAFE | {"%", "~"}
PERCENT_FORM = re.compile(r"(?:[A-Za-z0-9_:-]|%[0-9A-F]{2})+")
CID_CHARS = string.ascii_letters + string.digits + "_:-"

# Characters that have a meaning somewhere in a key or a sort key, plus multi-byte ones
# and lone surrogates (a Python str may hold them; the encoder takes them).
TRICKY = "/%.~#:-_ aZ09\x00\n\u00e9\u20ac\U0001f600\ud800\udc00"

ids = st.one_of(
    st.text(st.characters(codec=None, exclude_categories=())),
    st.text(alphabet=TRICKY, max_size=12),
    st.sampled_from(["", ".", "..", "~", "%", "%25", "a/b", "a%2Fb", "#", "c#x", "~" + "0" * 64]),
    # Around the 128-character limit, in single- and multi-byte characters.
    st.text(alphabet="ab-", min_size=120, max_size=136),
    st.text(alphabet="a/\u00e9\U0001f600", min_size=10, max_size=70),
    st.text(min_size=129, max_size=300),
)


def sha256_of(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def percent_length(value: str) -> int:
    """Length of ``value`` percent-encoded as the module describes (safe chars kept)."""
    return sum(1 if ch in SAFE else 3 * len(ch.encode("utf-8", "surrogatepass")) for ch in value)


@st.composite
def id_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two different ids, often close to each other (prefixes, encodings, case)."""
    a = draw(ids)
    b = draw(
        st.one_of(
            ids,
            st.just(encode_segment(a)),  # the id that looks like a's encoding
            st.just("~" + sha256_of(a)),  # the id that looks like a's hash form
            ids.map(lambda s: a + s),
            ids.map(lambda s: s + a),
            st.just(a[:-1]),
            st.just(a.swapcase()),
            st.just(unquote(a)),
        )
    )
    assume(a != b)
    return a, b


cids = st.one_of(
    st.from_regex(r"[A-Za-z0-9_:-]{1,128}", fullmatch=True),
    st.text(alphabet="0a:-_Z", min_size=1, max_size=5),
)


@st.composite
def cid_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two checkpoint ids, possibly equal, often one a prefix of the other."""
    a = draw(cids)
    b = draw(
        st.one_of(
            cids,
            st.just(a),
            st.text(alphabet=CID_CHARS, min_size=1, max_size=3).map(lambda s: a + s),
            st.just(a[:-1] or a),
        )
    )
    return a, b


prefixes = st.one_of(
    st.sampled_from(["", "prod/", "prod/agents/", "~/", "%2F/"]),
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_characters="/#\x00"), min_size=1),
        max_size=3,
    ).map(lambda parts: normalize_prefix("/".join(parts))),
)
digests = st.binary(min_size=32, max_size=32).map(bytes.hex)


def thread_keys(layout: Layout, thread: str, ns: str, cid: str, digest: str) -> list[str]:
    return [
        layout.thread_prefix(thread),
        layout.checkpoint_key(thread, ns, cid, digest),
        layout.blob_key(thread, digest),
        layout.blob_prefix(thread),
    ]


# --- encode_segment -------------------------------------------------------------------


@SETTINGS
@given(ids)
@example("a" * 128)
@example("a" * 129)
@example("\u00e9" * 21)  # 126 encoded characters
@example("\u00e9" * 22)  # 132 encoded characters
def test_segment_is_one_safe_key_segment(value: str) -> None:
    seg = encode_segment(value)
    assert seg, "a segment is never empty"
    assert set(seg) <= SEGMENT_CHARS, seg
    assert seg not in (".", "..")
    assert 1 <= len(seg) <= 128
    assert seg.isascii()


@SETTINGS
@given(ids)
@example("a" * 128)
@example("a" * 129)
@example("\u00e9" * 21)
@example("\u00e9" * 22)
def test_segment_has_the_documented_form_and_decodes(value: str) -> None:
    """``~`` for "", ``~`` + SHA-256 above 128 encoded characters, else percent-encoding
    that ``unquote`` reverses (so the plain form is injective on its own)."""
    seg = encode_segment(value)
    if value == "":
        assert seg == "~"
    elif percent_length(value) > 128:
        assert seg == "~" + sha256_of(value)
    else:
        assert PERCENT_FORM.fullmatch(seg), seg
        assert len(seg) == percent_length(value)
        assert unquote(seg, errors="surrogatepass") == value


@SETTINGS
@given(id_pairs())
@example(("a/b", "a%2Fb"))
@example(("", "~"))
@example(("x" * 200, "~" + sha256_of("x" * 200)))
def test_distinct_ids_never_share_a_segment(pair: tuple[str, str]) -> None:
    a, b = pair
    assert encode_segment(a) != encode_segment(b)


# --- S3 keys --------------------------------------------------------------------------


@SETTINGS
@given(prefixes, id_pairs(), ids, cids, digests)
def test_no_thread_folder_holds_another_threads_keys(
    prefix: str, pair: tuple[str, str], ns: str, cid: str, digest: str
) -> None:
    """``delete_thread``/``copy_thread`` list ``thread_prefix``: it must cover exactly the
    thread's own keys, and the partition keys of two threads must differ."""
    layout = Layout(prefix)
    a, b = pair
    for me, other in ((a, b), (b, a)):
        mine = layout.thread_prefix(me)
        assert mine.startswith(prefix)
        assert all(k.startswith(mine) for k in thread_keys(layout, me, ns, cid, digest))
        assert not any(k.startswith(mine) for k in thread_keys(layout, other, ns, cid, digest))
    assert layout.pk(a) != layout.pk(b)


@SETTINGS
@given(prefixes, ids, st.tuples(ids, cids, digests), st.tuples(ids, cids, digests))
def test_object_keys_of_a_thread_are_distinct(
    prefix: str, thread: str, one: tuple[str, str, str], two: tuple[str, str, str]
) -> None:
    """Checkpoint keys differ whenever (ns, checkpoint id, digest prefix) differ; blob keys
    whenever digests differ; no checkpoint key equals or prefixes a blob key; and every key
    has the shape the collector recognises as the layout's own."""
    layout = Layout(prefix)
    (ns1, cid1, d1), (ns2, cid2, d2) = one, two
    ck1, ck2 = (layout.checkpoint_key(thread, *t) for t in (one, two))
    assert (ck1 == ck2) == ((ns1, cid1, d1[:32]) == (ns2, cid2, d2[:32]))
    bk1, bk2 = layout.blob_key(thread, d1), layout.blob_key(thread, d2)
    assert (bk1 == bk2) == (d1 == d2)
    for ck in (ck1, ck2):
        for bk in (bk1, bk2):
            assert not ck.startswith(bk) and not bk.startswith(ck)
    for key in (ck1, ck2, bk1, bk2):
        assert _OBJECT_KEY.fullmatch(key[len(prefix) :]), key


@SETTINGS
@given(prefixes, prefixes, ids, ids, cids, digests)
def test_a_nested_prefix_is_not_the_outer_savers(
    outer: str, inner: str, thread: str, ns: str, cid: str, digest: str
) -> None:
    """``owns_pk`` and the collector's key pattern tell a saver's own keys from those of a
    saver whose prefix is nested inside its own."""
    assume(inner)
    mine, nested = Layout(outer), Layout(outer + inner)
    assert mine.owns_pk(mine.pk(thread))
    assert not mine.owns_pk(nested.pk(thread))
    for key in thread_keys(nested, thread, ns, cid, digest)[1:3]:
        assert not _OBJECT_KEY.fullmatch(key[len(outer) :]), key


@SETTINGS
@given(prefixes, prefixes, ids, ids)
def test_a_tenants_key_partition_is_no_threads(
    outer: str, inner: str, tenant: str, thread: str
) -> None:
    """A tenant's data key items (``tenant_pk``) share a partition with no thread of the
    saver's prefix or of a nested one, and listings of threads pass it by."""
    mine = Layout(outer)
    pk = mine.tenant_pk(tenant)
    assert not mine.owns_pk(pk)
    assert pk not in (mine.pk(thread), Layout(outer + inner).pk(thread))


@SETTINGS
@given(ids, ids, ids, cids)
def test_keys_fit_the_s3_and_dynamodb_limits(thread: str, ns: str, task: str, cid: str) -> None:
    """With the longest prefix ``normalize_prefix`` accepts: S3 keys and sort keys within
    1024 bytes, partition keys within 2048; sort keys are ASCII, so DynamoDB's byte order
    is Python's string order (which the range tests below rely on)."""
    layout = Layout(normalize_prefix("\u00e9" * 255 + "x"))
    assert len(layout.prefix.encode()) == 512
    digest = "f" * 64
    for key in (layout.checkpoint_key(thread, ns, cid, digest), layout.blob_key(thread, digest)):
        assert len(key.encode()) <= 1024
    assert len(layout.pk(thread).encode()) <= 2048
    for sk in (
        layout.checkpoint_sk(ns, cid),
        layout.writes_sk(ns, cid, task),
        layout.writes_upper_sk(ns, cid),
        layout.head_sk(ns),
        layout.ns_prefix_sk(ns),
    ):
        assert sk.isascii() and len(sk) <= 1024


# --- DynamoDB sort keys: the ranges the saver queries ----------------------------------


@SETTINGS
@given(id_pairs(), cids, ids)
def test_namespace_prefix_selects_exactly_its_namespace(
    ns_pair: tuple[str, str], cid: str, task: str
) -> None:
    """``begins_with(sk, ns_prefix_sk(ns))`` (latest checkpoint, ``list``) finds the
    checkpoints and writes of ``ns`` and nothing of another namespace and no head item;
    ``begins_with(sk, "c#")`` (``list`` over all namespaces) finds no head item."""
    a, b = ns_pair
    pre = Layout.ns_prefix_sk(a)
    assert Layout.checkpoint_sk(a, cid).startswith(pre)
    assert Layout.writes_sk(a, cid, task).startswith(pre)
    for sk in (
        Layout.checkpoint_sk(b, cid),
        Layout.writes_sk(b, cid, task),
        Layout.head_sk(a),
        Layout.head_sk(b),
    ):
        assert not sk.startswith(pre), (pre, sk)
    assert not Layout.head_sk(a).startswith(Layout.checkpoints_sk_prefix())
    assert Layout.head_sk(a) != Layout.head_sk(b)


@SETTINGS
@given(ids, cids, ids)
def test_sort_key_helpers_agree_with_the_sort_keys(ns: str, cid: str, task: str) -> None:
    """``checkpoints_sk_prefix`` begins every checkpoint and writes item (``list`` over
    all namespaces) and no head; ``is_head_sk`` tells heads apart; ``writes_upper_of``
    a checkpoint item's sort key is ``writes_upper_sk`` (delete by run)."""
    every = Layout.checkpoints_sk_prefix()
    checkpoint, writes = Layout.checkpoint_sk(ns, cid), Layout.writes_sk(ns, cid, task)
    assert checkpoint.startswith(every) and writes.startswith(every)
    assert Layout.ns_prefix_sk(ns).startswith(every)
    assert not Layout.head_sk(ns).startswith(every) and Layout.is_head_sk(Layout.head_sk(ns))
    assert not any(Layout.is_head_sk(sk) for sk in (checkpoint, writes, OWNER_SK))
    assert Layout.writes_upper_of(checkpoint) == Layout.writes_upper_sk(ns, cid)


@st.composite
def ns_pairs(draw: st.DrawFn) -> tuple[str, str]:
    return draw(st.one_of(id_pairs(), ids.map(lambda s: (s, s))))


@SETTINGS
@given(ns_pairs(), cid_pairs(), ids, ids)
def test_exact_range_holds_one_checkpoint_and_its_writes(
    ns_pair: tuple[str, str], cid_pair: tuple[str, str], task: str, other_task: str
) -> None:
    """``sk BETWEEN checkpoint_sk(ns, c) AND writes_upper_sk(ns, c)`` (``get_tuple`` of one
    checkpoint, ``list`` of one id) holds that checkpoint and all its writes items, and no
    item of any other (namespace, checkpoint) and no head item."""
    (ns, ns2), (cid, cid2) = ns_pair, cid_pair
    lo, hi = Layout.checkpoint_sk(ns, cid), Layout.writes_upper_sk(ns, cid)
    assert hi == lo + "#x"  # what delete_for_runs builds from an item's sk

    def inside(sk: str) -> bool:
        return lo <= sk <= hi

    assert inside(Layout.checkpoint_sk(ns, cid))
    assert inside(Layout.writes_sk(ns, cid, task))
    assert inside(Layout.writes_sk(ns, cid, other_task))
    assert not inside(Layout.head_sk(ns)) and not inside(Layout.head_sk(ns2))
    if (ns2, cid2) != (ns, cid):
        assert not inside(Layout.checkpoint_sk(ns2, cid2))
        assert not inside(Layout.writes_sk(ns2, cid2, task))
        assert not inside(Layout.writes_sk(ns2, cid2, other_task))


@SETTINGS
@given(ns_pairs(), cid_pairs(), ids)
def test_history_range_holds_the_namespace_up_to_a_checkpoint(
    ns_pair: tuple[str, str], cid_pair: tuple[str, str], task: str
) -> None:
    """``sk BETWEEN ns_prefix_sk(ns) AND checkpoint_sk(ns, c)`` (``list(before=c)``, the
    delta-channel history walk) holds the checkpoints of ``ns`` with ids up to ``c`` and the
    writes of those before ``c``; nothing of another namespace."""
    (ns, ns2), (cid, cid2) = ns_pair, cid_pair
    lo, hi = Layout.ns_prefix_sk(ns), Layout.checkpoint_sk(ns, cid)

    def inside(sk: str) -> bool:
        return lo <= sk <= hi

    assert inside(Layout.checkpoint_sk(ns2, cid2)) == (ns2 == ns and cid2 <= cid)
    assert inside(Layout.writes_sk(ns2, cid2, task)) == (ns2 == ns and cid2 < cid)
    assert not inside(Layout.head_sk(ns2))


@SETTINGS
@given(ids, cid_pairs(), ids, ids)
def test_sort_order_is_history_order_with_writes_after_their_checkpoint(
    ns: str, cid_pair: tuple[str, str], task: str, other_task: str
) -> None:
    """Checkpoint items sort like their ids, and the writes of a checkpoint sort after it and
    before the next checkpoint: a descending query meets a checkpoint's writes just before
    the checkpoint itself (``_latest_flow``)."""
    c1, c2 = sorted(cid_pair)
    assume(c1 != c2)
    ck1, ck2 = Layout.checkpoint_sk(ns, c1), Layout.checkpoint_sk(ns, c2)
    assert ck1 < ck2
    for t in (task, other_task):
        assert ck1 < Layout.writes_sk(ns, c1, t) < ck2 < Layout.writes_sk(ns, c2, t)


@SETTINGS
@given(ns_pairs(), cid_pairs(), id_pairs())
def test_a_writes_item_names_its_checkpoint(
    ns_pair: tuple[str, str], cid_pair: tuple[str, str], task_pair: tuple[str, str]
) -> None:
    """Splitting a writes sk at the first ``#w#`` gives its checkpoint's sk (``_owner``), and
    ``checkpoint_sk + "#w#"`` prefixes the writes of that checkpoint only (gc); distinct
    tasks, checkpoints and namespaces give distinct sort keys."""
    (ns, ns2), (cid, cid2), (t1, t2) = ns_pair, cid_pair, task_pair
    for n, c in ((ns, cid), (ns2, cid2)):
        for t in (t1, t2):
            w = Layout.writes_sk(n, c, t)
            assert w.split("#w#", 1)[0] == Layout.checkpoint_sk(n, c)
            assert w.startswith(Layout.checkpoint_sk(n, c) + "#w#")
    assert Layout.writes_sk(ns, cid, t1) != Layout.writes_sk(ns, cid, t2)
    if (ns2, cid2) != (ns, cid):
        assert not Layout.writes_sk(ns2, cid2, t1).startswith(Layout.checkpoint_sk(ns, cid) + "#w#")
        assert Layout.writes_sk(ns2, cid2, t1) != Layout.writes_sk(ns, cid, t1)
        assert Layout.checkpoint_sk(ns2, cid2) != Layout.checkpoint_sk(ns, cid)


# --- checkpoint ids ---------------------------------------------------------------------


@SETTINGS
@given(st.one_of(st.text(), cids, st.text(alphabet=CID_CHARS + "#/.", max_size=130)))
@example("a" * 128)
@example("a" * 129)
def test_checkpoint_ids_accepted_are_exactly_the_verbatim_safe_ones(value: str) -> None:
    ok = 1 <= len(value) <= 128 and all(ch in CID_CHARS for ch in value)
    if ok:
        assert check_checkpoint_id(value) == value
    else:
        with pytest.raises(InvalidConfigError):
            check_checkpoint_id(value)


@pytest.mark.parametrize("prefix", ["a\ud800", "x/#", "a//b", "\x00", "p" * 600])
def test_a_bad_prefix_is_an_invalid_config_error(prefix: str) -> None:
    with pytest.raises(InvalidConfigError, match="prefix"):
        normalize_prefix(prefix)
