"""The job queue for several worker nodes: claims with leases, renewal, expiry,
affinity, and the wake-up hint. Runs on both backends."""

from __future__ import annotations

import asyncio

from chorus.store import JobState, NodeRecord, SessionRecord, Store
from tests.store.conftest import MakeStore


async def test_a_claim_records_the_node_and_a_lease(store: Store) -> None:
    job = await store.create_job("x")
    claimed = await store.claim_job("n1", lease_s=30.0, host="h1")
    assert claimed is not None
    assert (claimed.id, claimed.state, claimed.node, claimed.attempts) == (
        job.id,
        JobState.RUNNING,
        "n1",
        1,
    )
    assert claimed.lease_expires_at is not None
    assert claimed.started_at is not None
    assert 25 < claimed.lease_expires_at - claimed.started_at < 35
    assert await store.claim_job("n2", lease_s=30.0) is None


async def test_one_session_runs_one_job_at_a_time_across_nodes(
    store: Store, session: SessionRecord
) -> None:
    first = await store.create_job("a", session_id=session.id)
    await store.create_job("b", session_id=session.id)
    loose = await store.create_job("c")
    assert (await store.claim_job("n1", lease_s=30.0)) is not None
    # The session has a running job (on n1): n2 gets the job without a session.
    other = await store.claim_job("n2", lease_s=30.0)
    assert other is not None
    assert other.id == loose.id
    assert await store.claim_job("n2", lease_s=30.0) is None
    await store.update_job(first.id, state=JobState.SUCCEEDED)
    assert (await store.claim_job("n2", lease_s=30.0)) is not None


async def test_excluded_sessions_are_passed_over(store: Store, session: SessionRecord) -> None:
    await store.create_job("in the session", session_id=session.id)
    loose = await store.create_job("no session")
    assert await store.claim_job("n1", lease_s=5, exclude_sessions=[session.id, ""]) is None
    got = await store.claim_job("n1", lease_s=5, exclude_sessions=[session.id])
    assert got is not None
    assert got.id == loose.id


async def test_affinity_pins_a_job_to_its_node_or_host(store: Store) -> None:
    pinned = await store.create_job("needs host-b", affinity="host-b")
    assert (await store.get_job(pinned.id)).affinity == "host-b"
    assert await store.claim_job("n1", lease_s=5, host="host-a") is None
    by_host = await store.claim_job("n2", lease_s=5, host="host-b")
    assert by_host is not None
    assert by_host.id == pinned.id
    by_id = await store.create_job("needs node n3", affinity="n3")
    assert await store.claim_job("n1", lease_s=5, host="host-a") is None
    got = await store.claim_job("n3", lease_s=5, host="host-c")
    assert got is not None
    assert got.id == by_id.id


async def test_leases_are_renewed_only_by_their_holder(store: Store) -> None:
    a = await store.create_job("a")
    b = await store.create_job("b")
    await store.claim_job("n1", lease_s=1.0)
    await store.claim_job("n2", lease_s=1.0)
    before = (await store.get_job(a.id)).lease_expires_at
    b_before = (await store.get_job(b.id)).lease_expires_at
    assert before is not None
    held = await store.extend_leases("n1", [a.id, b.id], lease_s=60.0)
    assert held == [a.id]
    after = (await store.get_job(a.id)).lease_expires_at
    assert after is not None
    assert after > before + 50
    assert (await store.get_job(b.id)).lease_expires_at == b_before  # n2's: untouched


async def test_expired_leases_requeue_then_fail_by_policy(store: Store) -> None:
    woken: list[int] = []
    store.on_jobs_queued(lambda: woken.append(1))
    job = await store.create_job("x")
    await store.claim_job("dead", lease_s=0.05)
    await store.claim_job("live", lease_s=60)  # nothing left to claim: a no-op
    await asyncio.sleep(0.1)
    woken.clear()
    requeued = await store.requeue_expired_jobs(max_attempts=2)
    assert [(j.id, j.state, j.node, j.lease_expires_at) for j in requeued] == [
        (job.id, JobState.QUEUED, None, None)
    ]
    assert woken, "a requeue must wake the claimers"
    assert await store.extend_leases("dead", [job.id], lease_s=60) == []  # it lost the job
    again = await store.claim_job("dead2", lease_s=0.05)
    assert again is not None
    assert again.attempts == 2
    await asyncio.sleep(0.1)
    failed = await store.requeue_expired_jobs(max_attempts=2)
    assert [j.state for j in failed] == [JobState.FAILED]
    assert failed[0].error is not None
    assert failed[0].error["code"] == "lease_expired"
    assert await store.requeue_expired_jobs() == []


async def test_a_restarting_node_requeues_only_its_own_jobs(store: Store) -> None:
    mine = await store.create_job("mine")
    theirs = await store.create_job("theirs")
    await store.claim_job("me", lease_s=30)
    await store.claim_job("them", lease_s=30)
    requeued = await store.requeue_running_jobs(node="me")
    assert [j.id for j in requeued] == [mine.id]
    assert (await store.get_job(theirs.id)).state is JobState.RUNNING


async def test_nodes_register_and_show_what_they_run(store: Store) -> None:
    first = await store.register_node("n1", host="alpha", bodies=["claude", "codex"])
    assert (first.host, first.bodies, first.running) == ("alpha", ["claude", "codex"], 0)
    await store.register_node("n2", host="beta", bodies=["gemini"])
    await store.create_job("x")
    job = await store.claim_job("n1", lease_s=30)
    assert job is not None
    await asyncio.sleep(0.01)
    await store.extend_leases("n1", [job.id], lease_s=30)  # also renews last_seen
    nodes = {n.id: n for n in await store.list_nodes()}
    assert set(nodes) == {"n1", "n2"}
    assert (nodes["n1"].running, nodes["n2"].running) == (1, 0)
    assert nodes["n1"].last_seen > first.last_seen
    again = await store.register_node("n1", host="alpha", bodies=["claude"])
    assert isinstance(again, NodeRecord)
    assert (again.bodies, again.started_at) == (["claude"], first.started_at)


async def test_queueing_a_job_wakes_claimers(store: Store) -> None:
    woken = asyncio.Event()
    store.on_jobs_queued(woken.set)
    await store.create_job("x")
    await asyncio.wait_for(woken.wait(), 5)


async def test_claims_from_two_stores_never_share_a_job(make_store: MakeStore) -> None:
    async with make_store() as one, make_store() as two:
        jobs = {(await one.create_job(f"job {i}")).id for i in range(40)}
        claims = await asyncio.gather(
            *(s.claim_job(f"n{i % 2}", lease_s=30) for i, s in enumerate([one, two] * 30))
        )
    taken = [c.id for c in claims if c is not None]
    assert sorted(taken) == sorted(jobs)
    assert claims.count(None) == 20


async def test_a_full_node_still_takes_system_jobs(store: Store) -> None:
    await store.create_job("a user's job")
    child = await store.create_job("a framework's child", options={"system": True})
    got = await store.claim_job("n1", lease_s=30, system_only=True)
    assert got is not None
    assert got.id == child.id
    assert await store.claim_job("n1", lease_s=30, system_only=True) is None
    assert await store.claim_job("n1", lease_s=30) is not None
