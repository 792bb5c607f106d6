"""kind: wrong
flaw: lookups go through a response cache (10 s TTL): repeated lookups replay the first, stale, negative without a read
should: H072
scenarios: lookup_lag, lookup_unavailable

A memoising HTTP client (requests-cache style) caches GETs. After a lost write the agent looks again and
again, as the contract says, but every later "lookup" is the first answer replayed: it logs observations
that no read on the wire backs, waits out the lag on them, and retries a write that already happened
(contract section 5, observations: a found true|false needs a read the proxy saw; H072).
"""
import sys
import time

from base import Agent


class Flawed(Agent):
    CACHE: dict = {}

    def http(self, op, method, path, **kwargs):
        if method != "GET":
            return super().http(op, method, path, **kwargs)
        key = (path, repr(sorted((kwargs.get("params") or {}).items())))
        hit = self.CACHE.get(key)
        if hit and time.time() - hit[0] < 10 and hit[1].ok:
            return hit[1]
        answer = super().http(op, method, path, **kwargs)
        self.CACHE[key] = (time.time(), answer)
        return answer


if __name__ == "__main__":
    sys.exit(Flawed().run())
