"""Whether this process reaches its database: one warning when an outage starts, one line when
it ends, however many statements fail in between."""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger(__name__)


class Reachability:
    """The state of one database as this process sees it (shared by its store handles)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.down_since: float | None = None
        """time.time() of the first failed connection of the current outage; None while up."""
        self.last_error = ""
        self.outages = 0
        self._lock = threading.Lock()

    @property
    def reachable(self) -> bool:
        """False from a failed connection until the next statement that works."""
        return self.down_since is None

    def down(self, error: str) -> None:
        """A connection failed: warn once for the outage (later failures only update it)."""
        with self._lock:
            self.last_error = error
            if self.down_since is not None:
                return
            self.down_since = time.time()
            self.outages += 1
        logger.warning(
            "store unreachable: %s; turns wait (their events stay pending, no attempt is"
            " counted) until it answers",
            error,
        )

    def up(self) -> None:
        """A statement worked: end the outage, saying how long it lasted."""
        if self.down_since is None:  # the common case: no lock on every statement
            return
        with self._lock:
            since, self.down_since = self.down_since, None
        if since is not None:
            logger.info("store reachable again after %.1f s: %s", time.time() - since, self.where)


_known: dict[str, Reachability] = {}
_known_lock = threading.Lock()


def reachability(where: str) -> Reachability:
    """The process-wide state of the database at `where` (host:port/database)."""
    with _known_lock:
        found = _known.get(where)
        if found is None:
            found = _known[where] = Reachability(where)
        return found


def outages() -> list[Reachability]:
    """Every database this process has used, for its metrics and probes."""
    with _known_lock:
        return list(_known.values())
