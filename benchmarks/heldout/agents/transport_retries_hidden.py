"""kind: wrong
flaw: urllib3 Retry(allowed_methods=None, status_forcelist=5xx) mounted under the logging layer: POST retries the log never sees
should: H017
scenarios: server_error_after_commit, response_lost_lookup_only

A team copies the "robust session" recipe: an HTTPAdapter with urllib3's Retry, all methods, 5xx forced.
The agent logs one attempt per call it makes; urllib3 resends the POST underneath (contract section 5: an
attempt is one real HTTP request; H017: every write on the wire is a logged attempt).
"""
import sys

import requests
from base import Agent
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry


class Flawed(Agent):
    def http(self, op, method, path, **kwargs):
        session = requests.Session()
        retry = Retry(total=2, connect=2, read=2, status=2, allowed_methods=None, backoff_factor=0.1,
                      status_forcelist=(500, 502, 503, 504), raise_on_status=False)
        session.mount("http://", HTTPAdapter(max_retries=retry))
        headers = {**self.headers_for(op), **kwargs.pop("headers", {})}
        url = path if path.startswith("http") else self.base_url(op) + path
        return session.request(method, url, headers=headers, timeout=self.TIMEOUT, **kwargs)


if __name__ == "__main__":
    sys.exit(Flawed().run())
