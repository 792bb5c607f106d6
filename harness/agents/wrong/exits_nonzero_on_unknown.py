"""Wrong: exits 1 when any operation ended unknown (a CLI's "something went wrong" status), though its work is
done; the contract asks for 0 whatever the outcomes (H063)."""

from typing import Any

from harness.agents.reference import Agent, main


class ExitsNonzeroOnUnknown(Agent):
    any_unknown = False

    def resolve(self, op: dict[str, Any], state: str, refs: list[str], evidence: list[str], reason: str,
                **fields: Any) -> None:
        self.any_unknown = self.any_unknown or state == "unknown"
        super().resolve(op, state, refs, evidence, reason, **fields)

    def run(self) -> int:
        status = super().run()
        return 1 if self.any_unknown else status


if __name__ == "__main__":
    main(ExitsNonzeroOnUnknown)
