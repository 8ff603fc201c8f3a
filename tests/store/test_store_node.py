"""WorkerNode: what the supervisor calls to claim, renew and recover (both backends)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from chorus.store import JobState, Store, WorkerNode, default_node_id


async def test_the_node_id_is_stable_per_home_and_host() -> None:
    assert default_node_id() == default_node_id()
    assert default_node_id().split("-")[-1].isalnum()


async def test_claim_holds_the_job_and_renew_keeps_it(store: Store) -> None:
    node = WorkerNode(store, bodies=["claude"], lease_s=1.0, node_id="n1", host="h")
    job = await store.create_job("x")
    claimed = await node.claim()
    assert claimed is not None
    assert claimed.id == job.id
    assert node.held == {job.id}
    await asyncio.sleep(0.6)
    assert await node.renew() == []
    renewed = await store.get_job(job.id)
    assert renewed.lease_expires_at is not None
    assert claimed.lease_expires_at is not None
    assert renewed.lease_expires_at > claimed.lease_expires_at
    [me] = await store.list_nodes()
    assert (me.id, me.host, me.bodies, me.running) == ("n1", "h", ["claude"], 1)


async def test_a_dead_nodes_job_is_taken_over(store: Store) -> None:
    dead = WorkerNode(store, bodies=[], lease_s=1.0, node_id="dead")
    live = WorkerNode(store, bodies=[], lease_s=1.0, node_id="live")
    job = await store.create_job("x")
    assert await dead.claim() is not None
    await asyncio.sleep(1.2)  # "dead" never renews
    requeued = await live.renew()
    assert [(j.id, j.state) for j in requeued] == [(job.id, JobState.QUEUED)]
    taken = await live.claim()
    assert taken is not None
    assert (taken.node, taken.attempts) == ("live", 2)
    lost: list[str] = []

    async def stop_it(job_id: str) -> None:
        lost.append(job_id)

    dead.on_lost = stop_it
    await dead.renew()  # it was only slow: it learns it lost the job, and stops it
    assert (dead.held, lost) == (set(), [job.id])
    assert live.held == {job.id}


async def test_a_job_the_other_node_already_ended_is_still_stopped_here(store: Store) -> None:
    """The frozen node wakes after the job went elsewhere and ended there: its body
    here may still be running the turn, so it is stopped all the same."""
    frozen = WorkerNode(store, bodies=[], lease_s=1.0, node_id="frozen")
    live = WorkerNode(store, bodies=[], lease_s=1.0, node_id="live")
    job = await store.create_job("x")
    assert await frozen.claim() is not None
    await asyncio.sleep(1.2)
    await live.renew()
    assert await live.claim() is not None
    await store.update_job(job.id, state=JobState.SUCCEEDED)  # it ended on "live"
    lost: list[str] = []

    async def stop_it(job_id: str) -> None:
        lost.append(job_id)

    frozen.on_lost = stop_it
    await frozen.renew()
    assert (frozen.held, lost) == (set(), [job.id])


async def test_a_job_that_ended_is_dropped_quietly(store: Store) -> None:
    lost: list[str] = []

    async def stop_it(job_id: str) -> None:
        lost.append(job_id)

    node = WorkerNode(store, bodies=[], node_id="n1", on_lost=stop_it)
    job = await store.create_job("x")
    await node.claim()
    await store.update_job(job.id, state=JobState.SUCCEEDED)
    await node.renew()
    assert (node.held, lost) == (set(), [])


async def test_keep_leases_renews_in_the_background(store: Store) -> None:
    node = WorkerNode(store, bodies=[], lease_s=1.5, node_id="n1")
    job = await store.create_job("x")
    await node.claim()
    keeper = asyncio.create_task(node.keep_leases())
    try:
        await asyncio.sleep(3.5)  # more than two lease lengths
        assert await store.requeue_expired_jobs() == []
        assert (await store.get_job(job.id)).state is JobState.RUNNING
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper


async def test_recover_requeues_what_this_node_left(store: Store) -> None:
    mine = await store.create_job("mine")
    theirs = await store.create_job("theirs")
    await store.claim_job("me", lease_s=60)
    await store.claim_job("other", lease_s=60)
    node = WorkerNode(store, bodies=[], node_id="me")
    requeued = {j.id for j in await node.recover()}
    # Shared store: only this node's jobs. SQLite: one node per home, so all of them.
    assert requeued == ({mine.id} if store.shared else {mine.id, theirs.id})


async def test_a_job_requeued_but_not_yet_taken_is_stopped_here_too(store: Store) -> None:
    slow = WorkerNode(store, bodies=[], lease_s=1.0, node_id="slow")
    other = WorkerNode(store, bodies=[], lease_s=1.0, node_id="other")
    lost: list[str] = []

    async def stop_it(job_id: str) -> None:
        lost.append(job_id)

    slow.on_lost = stop_it
    job = await store.create_job("x")
    assert await slow.claim() is not None
    await asyncio.sleep(1.2)  # e.g. the database was away longer than the lease
    assert [j.state for j in await other.renew()] == [JobState.QUEUED]
    await slow.renew()  # back: the job waits in the queue; running it here too would double it
    assert (slow.held, lost) == (set(), [job.id])
    assert (await store.get_job(job.id)).state is JobState.QUEUED


async def test_a_cwd_pins_a_job_to_its_host_unless_it_is_shared(
    store: Store, tmp_path: Path
) -> None:
    shared = tmp_path / "share"
    node = WorkerNode(store, bodies=[], node_id="n1", host="box-a", shared_paths=[str(shared)])
    pinned = node.affinity_for(str(tmp_path / "repo"))
    free = node.affinity_for(str(shared / "repo"))
    if store.shared:  # several daemons may claim: a local directory pins to its host
        assert (pinned, free) == ("box-a", None)
    else:  # one daemon: nothing to pin
        assert (pinned, free) == (None, None)
    assert node.affinity_for(None) is None
