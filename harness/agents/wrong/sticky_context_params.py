"""Wrong: fills each request from the conversation's context, so a parameter of the first intent (its
project) sticks to the next ones. The log shows the right intent; the destination commits the ticket
in the wrong project: the surviving effect is not the intended one."""

from harness.agents.reference import Agent, main


class StickyContextParams(Agent):
    def payload(self, op):
        body = super().payload(op)
        if isinstance(body, dict):
            first = self.intents[0].get("params", {})
            body.update({k: v for k, v in first.items() if k in body and k != "title"})
        return body


if __name__ == "__main__":
    main(StickyContextParams)
