"""Wrong: the delegated worker opens an operation of its own for the owner's intent, so one intent
has two operation ids, and the worker's effect is invisible from the owner's operation."""

from harness.agents.base import Agent, main
from harness.agents.worker import Worker
from harness.recorder import new_id


class SelfMintingWorker(Worker):
    def run_one(self, intent_id):
        owner_op = self.state[intent_id]
        op = dict(owner_op, operation_id=new_id("op"), attempts=[], observations=[])
        self.recorder.operation(op["operation_id"], intent_id=intent_id, intent=op["intent"],
                                parent_operation_id=owner_op["operation_id"], owner=self.worker_id,
                                idempotency_key=self.idempotency_key(op, ""))
        op["idempotency_key"] = self.idempotency_key(op, "")
        self.drive(op)
        owner_op["resolved"] = op.get("resolved")
        self.save()
        self.recorder.close()
        return 0


class Owner(Agent):
    def delegate(self, op):
        import subprocess
        import sys

        self.save()
        self.recorder.close()
        subprocess.run([sys.executable, "-m", "harness.agents.wrong.worker_new_operation_id", "--worker",
                        op["intent"]["intent_id"]], env=self.env, timeout=60, check=False)


if __name__ == "__main__":
    import sys

    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        sys.exit(SelfMintingWorker().run_one(sys.argv[2]))
    main(Owner)
