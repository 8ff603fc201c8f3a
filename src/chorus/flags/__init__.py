"""Flags without blocking: a body flags a decision with a default and
goes on; a person approves or rejects later, and a different decision reaches the
job as a steer (or a follow-up once it ended). Permission asks that must block
(approvals) are on the same board.
"""

from chorus.flags._board import (
    BoardItem,
    answer_for_session,
    answer_hint,
    board,
    decide,
    describe,
    find,
    from_approval,
    from_record,
    live_status,
    repl_answerer,
    running_job_of,
)
from chorus.flags._desk import FlagDesk, check_flag_input, flag_event, steer_text
from chorus.flags._tool import MCP_TOOLS, install_desk

__all__ = [
    "MCP_TOOLS",
    "BoardItem",
    "FlagDesk",
    "answer_for_session",
    "answer_hint",
    "board",
    "check_flag_input",
    "decide",
    "describe",
    "find",
    "flag_event",
    "from_approval",
    "from_record",
    "install_desk",
    "live_status",
    "repl_answerer",
    "running_job_of",
    "steer_text",
]
