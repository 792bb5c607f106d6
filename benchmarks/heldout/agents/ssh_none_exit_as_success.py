"""kind: wrong
flaw: SSH `exit_status or 0`: a connection dropped before the exit status (None) reads as exit 0
should: H005, H074, H028
scenarios: ssh_chain_dropped, ssh_append_dropped, ssh_restart_dropped

asyncssh returns exit_status None when the connection drops before the status; a falsy-default turns it
into 0 (contract section 4, SSH: no exit status ever arrives: log it sent_no_response; H005).
"""
import asyncio
import sys
from urllib.parse import urlsplit

from base import Agent, Outcome


class Flawed(Agent):
    async def send_ssh(self, op, attempt):
        import asyncssh

        url = urlsplit(self.base_url(op))
        try:
            conn = await asyncssh.connect(url.hostname, url.port, username="agent", known_hosts=None,
                                          client_keys=None, agent_path=None, connect_timeout=self.TIMEOUT[0])
        except (OSError, asyncssh.Error) as exc:
            return Outcome("not_sent", error=type(exc).__name__)
        try:
            async with conn:
                result = await asyncio.wait_for(conn.run(op["path"], env={"TRACEPARENT": attempt["traceparent"]}), 10)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            return Outcome("sent_no_response", error=type(exc).__name__)
        status = result.exit_status or 0
        return Outcome("response_received", None, {"exit_status": status, "stdout": str(result.stdout or "")})


if __name__ == "__main__":
    sys.exit(Flawed().run())
