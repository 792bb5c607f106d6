"""The bundled reference agent: `python -m harness.agents.reference`. See `harness.agents.base`."""

from harness.agents.base import Agent, main

if __name__ == "__main__":
    main(Agent)
