"""Wrong: does the work but writes no audit log at all: the destination acted, nobody can say why."""

from harness.agents.reference import Agent, main


class Silent(Agent):
    def __init__(self, env=None):
        super().__init__(env)
        # every event dropped on the floor; mypy flags any assignment over a method, and this one is the flaw
        self.recorder.emit = lambda *args, **kwargs: {}  # type: ignore[method-assign]


if __name__ == "__main__":
    main(Silent)
