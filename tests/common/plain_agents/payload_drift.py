"""Wrong: changes the payload on a retry (a fresh timestamp in the title) under the same key."""

from tests.common.plain_agents import PlainAgent, main


class PayloadDrift(PlainAgent):
    def body(self, intent, attempt):
        body = dict(intent["params"])
        if attempt:
            body["title"] = f"{body.get('title')} (retry {attempt})"
        return body


if __name__ == "__main__":
    main(PayloadDrift)
