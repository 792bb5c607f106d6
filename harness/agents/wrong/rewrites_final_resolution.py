"""Wrong: closes its operations, then writes each of them off as unknown when it ends ("not confirmed
again before exit"): a final resolution rewritten, so the log no longer says what the evidence proved
(reconciliation appends evidence, it never rewrites history; the operation model, H060)."""

from harness.agents.reference import Agent, main


class RewritesFinalResolution(Agent):
    def run(self):
        for intent in self.intents:
            self.handle(intent)
        for op in self.state.values():
            if op.get("resolved") in ("succeeded", "failed"):
                self.recorder.resolution(op["operation_id"], "unknown", evidence=list(op["attempts"]),
                                         reason="not confirmed again before exit")
        self.recorder.close()
        return 0


if __name__ == "__main__":
    main(RewritesFinalResolution)
