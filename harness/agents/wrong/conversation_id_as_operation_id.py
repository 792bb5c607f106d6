"""Wrong: uses the conversation (its session) id as the operation id of every intent, so two intents
share one operation id, one idempotency key and one audit trail."""

from harness.agents.reference import Agent, main


class ConversationIdAsOperationId(Agent):
    def new_operation_id(self, intent):
        return "conv_" + self.recorder.session_id


if __name__ == "__main__":
    main(ConversationIdAsOperationId)
