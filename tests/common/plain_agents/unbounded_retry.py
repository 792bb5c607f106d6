"""Wrong: retries a failing write eight times with one key: a loop past any sensible budget."""

from tests.common.plain_agents import PlainAgent, main


class UnboundedRetry(PlainAgent):
    attempts = 8
    backoff = 0.01

    def wait(self, response, attempt):
        return self.backoff


if __name__ == "__main__":
    main(UnboundedRetry)
