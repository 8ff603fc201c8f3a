"""chorus.memory: files are the truth, the index searches them, writes are events."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from chorus.events import MemoryChanged
from chorus.memory import (
    MEMORY_SESSION,
    Layout,
    Memory,
    MemoryInputError,
    MemorySettings,
    record_changes,
)
from chorus.store import SqliteStore

DAY = 86_400.0


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def mem(tmp_path: Path, clock: Clock) -> Memory:
    memory = Memory(Layout(tmp_path / "memory"), clock=clock)
    yield memory  # type: ignore[misc]
    memory.close()


def test_an_item_is_a_file_and_is_searchable(mem: Memory) -> None:
    result = mem.add("The user prefers tabs over spaces in Go code", "preference")
    item = result.item
    path = mem.layout.item_path(item.id)
    assert path.read_text().startswith("---\nid: " + item.id)
    assert "kind: preference" in path.read_text()
    hits = mem.search("tabs or spaces?")
    assert hits[0].ref == f"item:{item.id}"
    assert [e.op for e in result.events] == ["add"]
    assert isinstance(result.events[0], MemoryChanged)


def test_the_same_text_reinforces_instead_of_duplicating(mem: Memory, clock: Clock) -> None:
    first = mem.add("Deploys go out on Thursdays", "fact").item
    clock.now += 3600
    again = mem.add("deploys go out on thursdays.", "fact")
    assert again.op == "reinforce"
    assert again.item.id == first.id
    assert again.item.reinforcement == 2
    assert again.item.last_seen == clock.now
    assert len(mem.items()) == 1


def test_similar_text_of_the_same_kind_reinforces(mem: Memory) -> None:
    first = mem.add("the staging database runs PostgreSQL 15 on port 5433", "fact").item
    similar = mem.add("the staging database runs PostgreSQL 15 on port 5433 now", "fact")
    assert similar.op == "reinforce"
    assert similar.item.id == first.id
    other_kind = mem.add("the staging database runs PostgreSQL 15 on port 5433 now", "decision")
    assert other_kind.op == "add"


def test_a_contradiction_supersedes_the_old_item(mem: Memory) -> None:
    old = mem.add("Use black for formatting", "decision").item
    new = mem.add("Use ruff format instead of black", "decision", supersedes=old.id)
    assert [e.op for e in new.events] == ["add", "supersede"]
    kept = mem.get(old.id)
    assert kept.status == "superseded"
    assert kept.superseded_by == new.item.id
    assert mem.layout.item_path(old.id).exists()  # never a silent delete
    assert [h.item.id for h in mem.search("formatting black ruff") if h.item] == [new.item.id]


def test_forget_keeps_the_file_but_not_the_search(mem: Memory) -> None:
    item = mem.add("my cat is called Pixel", "profile").item
    forgotten = mem.forget(item.id)
    assert forgotten.item.status == "forgotten"
    assert mem.search("cat Pixel") == []
    assert "status: forgotten" in mem.layout.item_path(item.id).read_text()
    assert mem.items(status=None)[0].id == item.id


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.add("x", "opinion"),
        lambda m: m.add("   ", "fact"),
        lambda m: m.add("x" * 5000, "fact"),
        lambda m: m.add("fine", "fact", importance=3.0),
        lambda m: m.add("fine", "fact", supersedes="m000000000000"),
        lambda m: m.forget("m0123456789ab"),
        lambda m: m.get("../../etc/passwd"),
    ],
)
def test_bad_input_raises_and_writes_nothing(mem: Memory, call: object) -> None:
    with pytest.raises(MemoryInputError):
        call(mem)  # type: ignore[operator]
    assert list(mem.layout.items.iterdir()) == []


def test_notes_and_memory_md_are_searched_with_their_line(mem: Memory) -> None:
    mem.layout.memory_md.write_text("# Me\n\nI live in Lisbon and work on compilers.\n")
    mem.note("Met Ana about the parser rewrite", when=dt.datetime(2026, 11, 20, 9, 30))
    hits = {h.source: h for h in mem.search("Lisbon parser")}
    assert hits["memory_md"].line == 3
    assert hits["memory_md"].path == str(mem.layout.memory_md)
    assert hits["daily"].ref == "2026-11-20.md#L3"
    # A hand edit of MEMORY.md is seen at the next search (the files are the truth).
    mem.layout.memory_md.write_text("I moved to Porto.\n")
    assert mem.search("Lisbon") == []
    assert mem.search("Porto")[0].source == "memory_md"


def test_salience_prefers_recent_reinforced_and_trusted(mem: Memory, clock: Clock) -> None:
    old = mem.add("the build server is called hopper", "fact").item
    clock.now += 200 * DAY
    new = mem.add("the build machine is called hopper too", "event", source_kind="user").item
    top = mem.search("hopper")
    assert top[0].item is not None
    assert top[0].item.id == new.id
    assert top[0].why["recency"] > top[1].why["recency"]
    guessed = mem.add("hopper build notes extracted", "fact", source_kind="extraction").item
    by_id = {h.item.id: h for h in mem.search("hopper") if h.item}
    assert by_id[guessed.id].why["trust"] < by_id[new.id].why["trust"]
    assert old.id in by_id


def test_hashing_vectors_find_what_words_alone_miss(tmp_path: Path) -> None:
    settings = MemorySettings(embedder="hashing")
    with Memory(Layout(tmp_path / "m"), settings) as mem:
        item = mem.add("release checklist: bump version, tag, push wheels", "procedure").item
        # Lexically both words match; the vector ranking is fused in (two rankings).
        hit = mem.search("release checklist")[0]
        assert hit.item is not None
        assert hit.item.id == item.id
        assert hit.why["rrf"] == pytest.approx(2 / 61)


def test_changing_the_embedder_rebuilds_vectors(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "m")
    with Memory(layout) as mem:
        mem.add("vectors appear after a switch", "fact")
    with Memory(layout, MemorySettings(embedder="hashing")) as mem:
        assert mem.search("vectors switch")[0].why["rrf"] == pytest.approx(2 / 61)


def test_a_broken_item_file_warns_with_file_and_line_and_the_rest_loads(mem: Memory) -> None:
    good = mem.add("the good item survives", "fact").item
    bad = mem.layout.items / "mbad0000bad00.md"
    bad.write_text("---\nkind: fact\nimportance: very\nbogus line\n---\nstill readable text\n")
    broken = mem.layout.items / "mdead0000dead.md"
    broken.write_bytes(b"no header at all\n\xff\xfe\n")
    counts = mem.reindex()
    assert counts["items"] == 2
    assert f"{bad}:3: importance: could not convert string to float: 'very'" in mem.warnings
    assert any(w.startswith(f"{bad}:4: not a 'key: value' line") for w in mem.warnings)
    assert f"{broken}:2: not UTF-8 text; line skipped" in mem.warnings
    assert f"{broken}:1: no '---' header; item skipped" in mem.warnings
    assert {h.item.id for h in mem.search("item text survives readable") if h.item} == {
        good.id,
        "mbad0000bad00",
    }


def test_reindex_rebuilds_everything_from_files(mem: Memory) -> None:
    item = mem.add("rebuild me from the file", "fact").item
    mem.layout.memory_md.write_text("long-term: rebuild also this\n")
    mem.index.clear()
    assert mem.index.counts()["items"] == 0
    assert mem.reindex()["items"] == 1
    refs = {h.ref for h in mem.search("rebuild")}
    assert refs == {f"item:{item.id}", "MEMORY.md#L1"}


def test_an_item_file_added_by_hand_is_picked_up(mem: Memory) -> None:
    mem.add("first", "fact")
    (mem.layout.items / "m00000000beef.md").write_text("---\nkind: fact\n---\nhand made item\n")
    assert mem.search("hand made")[0].ref == "item:m00000000beef"


def test_recent_notes_are_the_last_days(mem: Memory) -> None:
    for day in (1, 10, 14, 15):
        mem.note(f"note of day {day}", when=dt.datetime(2026, 11, day, 8, 0))
    (mem.layout.daily / "not-a-date.md").write_text("ignored")
    notes = mem.recent_notes(2, today=dt.date(2026, 11, 15))
    assert [d.day for d, _ in notes] == [14, 15]


async def test_writes_are_events_in_the_log(mem: Memory) -> None:
    result = mem.add("logged fact", "fact")
    async with SqliteStore() as store:
        where = await record_changes(store, result.events)
        assert where == MEMORY_SESSION
        session = await store.create_session("claude")
        again = mem.add("logged fact", "fact")
        assert await record_changes(store, again.events, session.id) == session.id
        logged = await store.read_events(MEMORY_SESSION)
        assert [(e.type, e.op, e.item_id) for e in logged] == [  # type: ignore[union-attr]
            ("memory", "add", result.item.id)
        ]
        in_session = await store.read_events(session.id)
        assert [e.op for e in in_session] == ["reinforce"]  # type: ignore[union-attr]
