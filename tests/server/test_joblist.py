"""`GET /jobs` documents its filters and order as patterns; whatever a pattern allows, the list
reads, so that a request the API document calls valid is never refused."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from pai.server.joblist import (
    ORDER_PATTERN,
    PRIORITY_PATTERN,
    STATE_PATTERN,
    JobListQuery,
)


@given(st.from_regex(ORDER_PATTERN, fullmatch=True))
def test_every_documented_order_is_read(order: str) -> None:
    JobListQuery.parse(order=order)


@given(
    st.from_regex(STATE_PATTERN, fullmatch=True), st.from_regex(PRIORITY_PATTERN, fullmatch=True)
)
def test_every_documented_state_and_priority_list_is_read(states: str, priorities: str) -> None:
    JobListQuery.parse(state=states, job_priority=priorities)


def test_the_patterns_refuse_what_the_list_refuses() -> None:
    assert re.fullmatch(ORDER_PATTERN, "jobName, desc")
    assert not re.fullmatch(ORDER_PATTERN, "jobName,SIDEWAYS")
    assert not re.fullmatch(ORDER_PATTERN, "bogus,ASC")
    assert re.fullmatch(STATE_PATTERN, "RUNNING, WAITING,")
    assert not re.fullmatch(STATE_PATTERN, "RUNNING,DONE")
    assert re.fullmatch(PRIORITY_PATTERN, "default,prod")
    assert not re.fullmatch(PRIORITY_PATTERN, "urgent")
