"""Jobs as the features see them: the request (:class:`JobRequest`) and the port to
the daemon's job runner (:class:`JobPort`), below the features so that they never
import the daemon."""

from chorus.jobs._port import JobPort, OutcomeHook, StatusHook
from chorus.jobs._request import JobRequest

__all__ = ["JobPort", "JobRequest", "OutcomeHook", "StatusHook"]
