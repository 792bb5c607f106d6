// Types of index.js, for TypeScript agents. Field names are the contract's (docs/contract.md, section 5);
// an event may carry more fields than these, as the JSON Schema allows.

export declare const AUDIT_LOG_ENV: "HARNESS_AUDIT_LOG";
export declare const EVENT_NAMES: readonly ["operation", "attempt", "observation", "resolution", "approval"];
export declare const GENESIS: string;

export type EventName = (typeof EVENT_NAMES)[number];
export type DispatchState = "not_sent" | "sent_no_response" | "response_received" | "execution_error";
export type OperationState = "succeeded" | "failed" | "unknown" | "cancelled" | "duplicate_effect_confirmed";
export type RetryReason =
  | "connection_not_established" | "rate_limited" | "destination_5xx" | "response_lost_after_dispatch"
  | "credential_refreshed" | "operator_requested" | "task_redelivered" | "activity_retry" | "step_retry";
export type ObservationSource = "lookup" | "status_poll" | "callback" | "read_after_write" | "operator";

/** Any further fields of an event; `undefined` and `null` values are left out of the line. */
export type Fields = Record<string, unknown>;

export interface OperationFields extends Fields {
  intent_id?: string;
  intent?: { kind: string; destination: string; params: Record<string, unknown> };
  idempotency_key?: string | null;
  payload_fingerprint?: string;
  supersedes_operation_id?: string;
}

export interface AttemptFields extends Fields {
  attempt_number?: number;
  destination?: string;
  method?: string;
  path?: string;
  idempotency_key?: string | null;
  request_fingerprint?: string;
  prior_request_fingerprint?: string;
  http_status?: number;
  retry_of_attempt_id?: string;
  retry_reason?: RetryReason;
  retry_decision?: string;
  attempt_budget_remaining?: number;
  effect_refs?: string[] | null;
  traceparent?: string;
  error?: string;
}

export interface ObservationFields extends Fields {
  source?: ObservationSource;
  method?: string;
  path?: string;
  found?: boolean | null;
  effect_refs?: string[];
  lag_possible?: boolean;
}

export interface ResolutionFields extends Fields {
  effect_refs?: string[];
  evidence?: string[];
  reason?: string;
  correction_operation_id?: string;
}

export interface ApprovalFields extends Fields {
  approver?: string;
  decision: "approved" | "denied";
  scope: "retry" | "compensate" | "close" | "session";
  reason?: string;
}

export type AuditEvent = Fields & { event: EventName; ts: number | string; session_id: string; operation_id: string };

export declare function canonicalJson(value: unknown): string;
export declare function fingerprint(value: unknown): string;
export declare function newId(prefix: string): string;
export declare function loggedRecords(path: string): Map<string, AuditEvent>;

export interface RecorderOptions {
  sessionId?: string;
  chain?: boolean;
}

export declare class Recorder {
  constructor(path: string, options?: RecorderOptions);
  static fromEnv(options?: RecorderOptions): Recorder;
  readonly path: string;
  readonly sessionId: string;
  readonly chain: boolean;
  readonly head: string | null;
  emit(event: EventName, operationId: string, fields?: Fields): AuditEvent;
  operation(operationId: string, fields?: OperationFields): AuditEvent;
  attempt(operationId: string, attemptId: string, dispatchState: DispatchState, fields?: AttemptFields): AuditEvent;
  observation(operationId: string, observationId: string, fields?: ObservationFields): AuditEvent;
  resolution(operationId: string, state: OperationState, fields?: ResolutionFields): AuditEvent;
  approval(operationId: string, approvalId: string, fields: ApprovalFields): AuditEvent;
  close(): void;
}
