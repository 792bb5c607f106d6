"""Wrong: the delegated worker opens an operation of its own for the owner's intent, so one intent
has two operation ids, and the worker's effect is invisible from the owner's operation."""

from harness.agents.reference import Agent, main
from harness.recorder import new_id


class SelfMintingWorker(Agent):
    def run_worker(self, intent_id):
        owner_op = self.state[intent_id]
        op = dict(owner_op, operation_id=new_id("op"), attempts=[], observations=[])
        op["idempotency_key"] = self.idempotency_key(op, "")
        self.recorder.operation(op["operation_id"], intent_id=intent_id, intent=op["intent"],
                                parent_operation_id=owner_op["operation_id"], owner=self.worker_id,
                                idempotency_key=op["idempotency_key"])
        self.drive(op)
        owner_op["resolved"] = op.get("resolved")
        self.save()
        self.recorder.close()
        return 0


if __name__ == "__main__":
    main(SelfMintingWorker)
