"""Wrong: its session_id is a constant from its config, the same for every process, a restart included, so the
restarted run's lines read as the killed run's (H020: one process per session id)."""

from harness.agents.reference import Agent, main

CONFIGURED_SESSION = "ses_agent"


class FixedSessionId(Agent):
    def __init__(self, env: dict[str, str] | None = None) -> None:
        super().__init__(env)
        self.recorder.session_id = CONFIGURED_SESSION


if __name__ == "__main__":
    main(FixedSessionId)
