"""Wrong: `exit_status or 0`: an SSH command whose connection dropped before its exit status (asyncssh's None) is
logged as answered with exit 0, and closed on it: the host ran it, but the agent never heard back (H005)."""

from harness.agents.reference import Agent, Outcome, main


class SshLostExitAsZero(Agent):
    async def send_ssh(self, attempt_id, request, op):
        outcome = await super().send_ssh(attempt_id, request, op)
        if outcome.dispatch_state == "sent_no_response" and outcome.exit_status is None and "exit status" in (
                outcome.error or ""):
            return Outcome(attempt_id, "response_received", exit_status=0, body="")  # None or 0
        return outcome


if __name__ == "__main__":
    main(SshLostExitAsZero)
