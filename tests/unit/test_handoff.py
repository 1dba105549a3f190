"""The pump-to-slots hand-off of the AsyncWorker (conveyor/_handoff.py), without a server."""

from __future__ import annotations

import asyncio

from conveyor._handoff import Handoff


async def test_items_go_to_waiting_slots_first_come_first_served_then_wait_in_order():
    handoff: Handoff[int] = Handoff()
    first, second = asyncio.ensure_future(handoff.get()), asyncio.ensure_future(handoff.get())
    await asyncio.sleep(0)
    for item in (1, 2, 3, 4):
        handoff.put(item)
    assert (await first, await second) == (1, 2)
    assert await handoff.get() == 3
    assert handoff.take_all() == [4]
    assert handoff.take_all() == []


async def test_a_slot_cancelled_while_waiting_is_skipped():
    handoff: Handoff[str] = Handoff()
    gone, waiting = asyncio.ensure_future(handoff.get()), asyncio.ensure_future(handoff.get())
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    handoff.put("job")
    assert await waiting == "job"
    assert handoff.take_all() == []


async def test_an_item_given_to_a_slot_cancelled_before_it_ran_is_kept():
    handoff: Handoff[str] = Handoff()
    slot = asyncio.ensure_future(handoff.get())
    await asyncio.sleep(0)
    handoff.put("job")  # the slot's future is done, the slot has not run yet
    slot.cancel()
    await asyncio.gather(slot, return_exceptions=True)
    assert slot.cancelled()
    assert handoff.take_all() == ["job"]  # released at shutdown, not lost
