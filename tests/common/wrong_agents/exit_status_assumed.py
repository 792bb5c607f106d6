"""Wrong: logs every SSH command that answered as exit 0 (it reads its own client wrapper's status, not the
remote command's) and closes on it: the log's exit is not the one the host ran (H074, the claims table's SSH
exit status). Not among the bundled wrong agents: no catalogue scenario has a host whose command answers with a
non-zero exit, so it is caught on tests/engine/scenarios/ssh_create_user_fails.yaml."""

from dataclasses import replace

from harness.agents.reference import Agent, main


class ExitStatusAssumed(Agent):
    async def send_ssh(self, attempt_id, request, op):
        outcome = await super().send_ssh(attempt_id, request, op)
        return replace(outcome, exit_status=0) if outcome.exit_status is not None else outcome


if __name__ == "__main__":
    main(ExitStatusAssumed)
