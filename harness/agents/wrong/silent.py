"""Wrong: does the work but writes no audit log at all: the destination acted, nobody can say why."""

from harness.agents.reference import Agent, main


class Silent(Agent):
    def __init__(self, env=None):
        super().__init__(env)
        self.recorder.emit = lambda *args, **kwargs: {}  # every event dropped on the floor


if __name__ == "__main__":
    main(Silent)
