"""What the journal says when the destination is down: the client really got mitmproxy's 502.

End to end: a real ``requests`` client, the process's real proxy, and a destination port nobody
listens on. mitmproxy's http layer answers ``502 Bad Gateway`` when the upstream connection fails
before any response started; the journal must record that answer, not a closed connection.
"""

from __future__ import annotations

import requests

from harness.journal import read_journal
from harness.proxy.host import free_port


def test_destination_down_journals_the_502_the_client_got(proxy_host, tmp_path):
    journal_path = tmp_path / "journal.ndjson"
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    try:
        routes = proxy_host.configure({"tickets": down}, [], journal_path)
        got = requests.post(routes.urls["tickets"] + "/tickets", json={"title": "t"}, timeout=10)
    finally:
        proxy_host.finish()
    assert got.status_code == 502
    (entry,) = read_journal(journal_path)
    assert (entry["client_outcome"], entry["client_status"]) == ("response", 502)
    assert (entry["forwarded"], entry["upstream_status"], entry["forward_count"]) == (False, None, 0)
