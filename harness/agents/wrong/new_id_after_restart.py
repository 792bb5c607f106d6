"""Wrong: keeps no durable record of pending operations, so a restart mints a new operation id
(and with it a new key and a new client reference) for an intent already in flight."""

from harness.agents.reference import Agent, main


class NewIdAfterRestart(Agent):
    def __init__(self, env=None):
        super().__init__(env)
        self.state = {}  # forgets whatever the previous run persisted


if __name__ == "__main__":
    main(NewIdAfterRestart)
