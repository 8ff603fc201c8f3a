"""Jobs as the features see them: the request (:class:`JobRequest`) and the port to
the daemon's job runner (:class:`JobPort`), below the features so that they never
import the daemon."""

from chorus.jobs._port import EndHandler, JobEndLike, JobPort, OutcomeBus, StatusHook
from chorus.jobs._request import JobRequest

__all__ = ["EndHandler", "JobEndLike", "JobPort", "JobRequest", "OutcomeBus", "StatusHook"]
