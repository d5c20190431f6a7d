// Every error code keyroll raises, audits, alerts or puts on a span: one list (issue 29 §3, STYLE.md
// rule 13). Operators route alerts on these codes, so a code never changes its spelling; a new one is
// added here first, since KeyrollError and every error class take an ErrorCode (a code missing here
// fails the type check). docs/error-codes.md is generated from this list
// (`npm run --silent docs:error-codes`), and test/error-codes.test.ts holds the list against src/ and
// docs/ both ways.

/** How bad it usually is: the severity of the alert that carries the code, where one is sent. */
export type ErrorSeverity = 'critical' | 'error' | 'warning' | 'info';

export interface ErrorCodeInfo {
  severity: ErrorSeverity;
  /** True when the same call, or the next run, may succeed without a person acting. */
  retryable: boolean;
  /** Where an operator reads what to do: a page of docs/ and the anchor of its section. */
  runbook: `${string}.md#${string}`;
  /** What happened, in one sentence. */
  meaning: string;
}

const ONE_KEY_FAILED = 'runbook.md#one-key-failed-summary-keyroll-could-not-rotate-key-id-org-at-step-step-';
const RUN_STOPPED = 'runbook.md#the-run-stopped-step-run';
const ALERTS_UNDELIVERED = 'runbook.md#alerts-cannot-be-delivered';
const CONSUMER = 'runbook.md#a-consumer-was-not-refreshed';
const RECOVERED = 'runbook.md#recovered-after-a-crash-step-recovery-warning';
const NATIVE_STEP = 'aws-native.md#when-a-step-fails';
const LEAK_FAILED = 'runbook.md#a-leak-rotation-failed';
const GITHUB = 'runbook.md#github-secret-scanning';
const POLICY = 'policy.md#validation-and-errors';
const EXIT = 'exit-codes.md#exit-codes';
const LEADER = 'daemon.md#replicas-and-the-leader';
const CRD = 'crds.md#watch-and-status';

export const ERROR_CODES = {
  KR_ALERT_ABORTED: {
    severity: 'warning',
    retryable: false,
    runbook: ALERTS_UNDELIVERED,
    meaning: 'A shutdown cut an alert or notice delivery off; it was abandoned, not retried.',
  },
  KR_ALERT_DEADLINE: {
    severity: 'warning',
    retryable: true,
    runbook: ALERTS_UNDELIVERED,
    meaning: 'An alert delivery attempt ran past its total deadline (the networkCode of KR_ALERT_NETWORK).',
  },
  KR_ALERT_NETWORK: {
    severity: 'warning',
    retryable: true,
    runbook: ALERTS_UNDELIVERED,
    meaning: 'An alert sink could not be reached (refused, reset, DNS, timeout) on every attempt.',
  },
  KR_ALERT_REJECTED: {
    severity: 'warning',
    retryable: false,
    runbook: ALERTS_UNDELIVERED,
    meaning: 'An alert sink answered 4xx other than 429: the request is wrong, so it is not retried.',
  },
  KR_ALERT_SINK_INVALID: {
    severity: 'warning',
    retryable: false,
    runbook: ALERTS_UNDELIVERED,
    meaning: "An alert sink's configuration cannot produce a request.",
  },
  KR_ALERT_SINK_UNAVAILABLE: {
    severity: 'warning',
    retryable: true,
    runbook: ALERTS_UNDELIVERED,
    meaning: 'An alert sink answered 5xx or 429 on every attempt.',
  },
  KR_ALERT_SINK_UNKNOWN: {
    severity: 'warning',
    retryable: false,
    runbook: ALERTS_UNDELIVERED,
    meaning: 'The policy names an alert sink it does not define.',
  },
  KR_ALERT_SINK_UNSUPPORTED: {
    severity: 'warning',
    retryable: false,
    runbook: ALERTS_UNDELIVERED,
    meaning: 'An alert sink cannot take this kind of message (a success notice to PagerDuty).',
  },
  KR_API_ABORTED: {
    severity: 'warning',
    retryable: false,
    runbook: RUN_STOPPED,
    meaning: 'An API call was abandoned (shutdown) while it waited for the rate limiter.',
  },
  KR_API_BAD_REQUEST: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API answered 400: the request is invalid (key id, organization).',
  },
  KR_API_CONFLICT: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API answered 409.',
  },
  KR_API_CONNECTION: {
    severity: 'error',
    retryable: true,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API could not be reached or the connection was reset; a roll may have happened.',
  },
  KR_API_CREDENTIAL_UNAVAILABLE: {
    severity: 'critical',
    retryable: false,
    runbook: RUN_STOPPED,
    meaning:
      "keyroll's own API credential could not be obtained (unreadable reference, OAuth token endpoint down).",
  },
  KR_API_FORBIDDEN: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API answered 403: the principal may not roll this key (API keys never can).',
  },
  KR_API_MALFORMED_RESPONSE: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: "A 2xx answer whose body is not the spec's shape.",
  },
  KR_API_NOT_FOUND: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API answered 404: no such key.',
  },
  KR_API_PAYLOAD_TOO_LARGE: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API answered 413: the request body is over its limit.',
  },
  KR_API_PLAN_REQUIRED: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: "The API answered 402: the organization's plan does not allow API keys.",
  },
  KR_API_RATE_LIMITED: {
    severity: 'error',
    retryable: true,
    runbook: ONE_KEY_FAILED,
    meaning: "The API answered 429 past the run's budget for waiting.",
  },
  KR_API_SERVER_ERROR: {
    severity: 'error',
    retryable: true,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API answered 5xx; a roll may have happened.',
  },
  KR_API_TIMEOUT: {
    severity: 'error',
    retryable: true,
    runbook: ONE_KEY_FAILED,
    meaning: 'An API call did not finish in time; a roll may have happened.',
  },
  KR_API_UNAUTHORIZED: {
    severity: 'critical',
    retryable: false,
    runbook: RUN_STOPPED,
    meaning: "The API answered 401: keyroll's own credential is missing, invalid or expired.",
  },
  KR_API_UNEXPECTED_STATUS: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The API answered a status the spec does not list.',
  },
  KR_BACKEND_CONFLICT: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'A check-and-set write lost against another writer.',
  },
  KR_BACKEND_DENIED: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The backend refused keyroll (401/403, AccessDenied, a missing capability, a file permission).',
  },
  KR_BACKEND_FAILED: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The backend refused the call for another reason (a 4xx not covered, an I/O error on disk).',
  },
  KR_BACKEND_INVALID_RESPONSE: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The backend answered with something its API does not document.',
  },
  KR_BACKEND_INVALID_TARGET: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The destination itself is unusable (a path escaping the base directory, an empty name).',
  },
  KR_BACKEND_NOT_FOUND: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'The secret, its mount or its parent does not exist where it must.',
  },
  KR_BACKEND_SCHEDULED_FOR_DELETION: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning:
      'The AWS secret (or its lock companion) is scheduled for deletion until an operator restores it.',
  },
  KR_BACKEND_THROTTLED: {
    severity: 'error',
    retryable: true,
    runbook: 'runbook.md#a-backend-keeps-throttling',
    meaning: "A backend's request quota still refused the call after keyroll waited out its budget.",
  },
  KR_BACKEND_TIMEOUT: {
    severity: 'error',
    retryable: true,
    runbook: ONE_KEY_FAILED,
    meaning: 'A backend request did not finish in time; its outcome is unknown.',
  },
  KR_BACKEND_UNAVAILABLE: {
    severity: 'error',
    retryable: true,
    runbook: ONE_KEY_FAILED,
    meaning: 'The backend could not be reached or answered 5xx.',
  },
  KR_BACKEND_VERSION_QUOTA: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning:
      'The AWS secret is at its version quota (100 versions, none removed under 24 hours); only time frees it.',
  },
  KR_CONSUMER_API_UNSERVED: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning: 'The API server serves no version of external-secrets.io keyroll speaks.',
  },
  KR_CONSUMER_CONFLICT: {
    severity: 'error',
    retryable: true,
    runbook: CONSUMER,
    meaning: "A consumer object kept changing under keyroll's precondition (409) on every attempt.",
  },
  KR_CONSUMER_FAILED: {
    severity: 'error',
    retryable: true,
    runbook: CONSUMER,
    meaning: 'A consumer was not refreshed and its failure carried no code of its own.',
  },
  KR_CONSUMER_FORBIDDEN: {
    severity: 'error',
    retryable: false,
    runbook: 'kubernetes.md#give-keyroll-access-least-privilege',
    meaning: "keyroll's identity may not read or change a consumer object (403).",
  },
  KR_CONSUMER_FORCE_SYNC_OFF: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning: "An ExternalSecret's refresh settings switch force-sync off.",
  },
  KR_CONSUMER_NOT_FOUND: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning: 'A consumer object does not exist (404).',
  },
  KR_CONSUMER_NO_CLIENT: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning: 'No Kubernetes client could be made (no in-cluster account, no kubeconfig, a bad context).',
  },
  KR_CONSUMER_REFUSED: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning:
      'The API server refused a consumer request (400, 422, …): the object is not what the policy says.',
  },
  KR_CONSUMER_ROLLOUT_FAILED: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning: 'A rollout cannot complete on its own (progress deadline exceeded, OnDelete update strategy).',
  },
  KR_CONSUMER_SYNC_BLOCKED: {
    severity: 'error',
    retryable: true,
    runbook: CONSUMER,
    meaning: 'A workload was not restarted because an ExternalSecret it reads did not sync.',
  },
  KR_CONSUMER_SYNC_FAILED: {
    severity: 'error',
    retryable: true,
    runbook: CONSUMER,
    meaning: 'An ExternalSecret reports that its sync failed (Ready False).',
  },
  KR_CONSUMER_SYNC_UNPROVABLE: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning:
      'A VaultStaticSecret with hmacSecretData false: the operator records no secretMAC, so nothing proves it synced the stored value.',
  },
  KR_CONSUMER_TIMEOUT: {
    severity: 'error',
    retryable: true,
    runbook: CONSUMER,
    meaning: 'A consumer request or wait ran out of time (syncTimeout, rolloutTimeout, a request deadline).',
  },
  KR_CONSUMER_UNAUTHORIZED: {
    severity: 'error',
    retryable: false,
    runbook: CONSUMER,
    meaning: "The API server refused keyroll's Kubernetes credential (401).",
  },
  KR_CONSUMER_UNREACHABLE: {
    severity: 'error',
    retryable: true,
    runbook: CONSUMER,
    meaning: 'The Kubernetes API server could not be reached or answered 5xx.',
  },
  KR_CONSUMER_WEBHOOK_FAILED: {
    severity: 'error',
    retryable: true,
    runbook: CONSUMER,
    meaning: 'A webhook consumer did not take the notice after its retries.',
  },
  KR_CRD_API_ERROR: {
    severity: 'error',
    retryable: true,
    runbook: CRD,
    meaning:
      'The API server answered a watch, list or status request of a keyroll.io object with an unexpected status (5xx, 400, 422).',
  },
  KR_CRD_CONFLICT: {
    severity: 'warning',
    retryable: true,
    runbook: CRD,
    meaning:
      "An object's status kept changing under keyroll's resourceVersion precondition (409) on every attempt; the next change of the object writes it again.",
  },
  KR_CRD_EXPIRED: {
    severity: 'info',
    retryable: true,
    runbook: CRD,
    meaning:
      'The API server no longer holds the resourceVersion a watch resumed from (410 Gone): keyroll lists the resource again and emits the differences.',
  },
  KR_CRD_FORBIDDEN: {
    severity: 'error',
    retryable: false,
    runbook: CRD,
    meaning: "keyroll's identity may not list, watch or patch the resource, or create an Event (401, 403).",
  },
  KR_CRD_NOT_FOUND: {
    severity: 'error',
    retryable: true,
    runbook: CRD,
    meaning:
      'The API server does not serve the resource (404): its CustomResourceDefinition is not installed.',
  },
  KR_CRD_SCHEMA: {
    severity: 'error',
    retryable: false,
    runbook: 'crds.md#generating-the-crds',
    meaning:
      'The CRD generator met a zod schema with no structural form (a developer error: `npm run schema:crds` fails, nothing runs).',
  },
  KR_CRD_TIMEOUT: {
    severity: 'warning',
    retryable: true,
    runbook: CRD,
    meaning:
      'A request to the API server had no answer within its deadline, or a watch went silent past its own timeout.',
  },
  KR_CRD_UNREACHABLE: {
    severity: 'warning',
    retryable: true,
    runbook: CRD,
    meaning: 'The API server could not be reached, or it cut the connection.',
  },
  KR_CREDENTIAL_UNAVAILABLE: {
    severity: 'critical',
    retryable: false,
    runbook: RUN_STOPPED,
    meaning: 'A credential could not be obtained from its provider (a reference, a token endpoint).',
  },
  KR_DAEMON_STOPPING: {
    severity: 'info',
    retryable: false,
    runbook: 'daemon.md#signals-and-exit-codes',
    meaning: 'The daemon is shutting down and refused a policy reload.',
  },
  KR_DRIFT_DETECTED: {
    severity: 'critical',
    retryable: false,
    runbook: 'runbook.md#drift-a-stored-secret-that-stopped-working',
    meaning: 'The stored secret no longer works: the key was rolled outside keyroll.',
  },
  KR_DRIFT_STANDBY_DEAD: {
    severity: 'error',
    retryable: false,
    runbook: 'runbook.md#drift-a-stored-secret-that-stopped-working',
    meaning: 'The standby of a slot entry no longer works.',
  },
  KR_DURATION_INVALID: {
    severity: 'error',
    retryable: false,
    runbook: POLICY,
    meaning: 'A duration in the policy or a flag is not one keyroll reads (15m, 30d).',
  },
  KR_EMULATOR_REQUEST_REFUSED: {
    severity: 'info',
    retryable: false,
    runbook: 'emulator.md#error-codes-by-status',
    meaning: 'The emulator refused a request as the API would.',
  },
  KR_EMULATOR_SEED_INVALID: {
    severity: 'error',
    retryable: false,
    runbook: 'emulator.md#seed-format',
    meaning: "The emulator's seed file is invalid.",
  },
  KR_EMULATOR_UNKNOWN_ENTITY: {
    severity: 'error',
    retryable: false,
    runbook: 'emulator.md#state-for-tests-emustate',
    meaning: 'A test asked the emulator for an organization, key or project it does not have.',
  },
  KR_ESCROW_RECIPIENT_INVALID: {
    severity: 'critical',
    retryable: false,
    runbook: 'runbook.md#recovering-a-secret-from-escrow',
    meaning: 'An escrow recipient is not an age public key.',
  },
  KR_ESCROW_WRITE_FAILED: {
    severity: 'critical',
    retryable: false,
    runbook: 'runbook.md#recovering-a-secret-from-escrow',
    meaning: 'The escrow directory or file could not be created or written.',
  },
  KR_EXIT_1: {
    severity: 'error',
    retryable: true,
    runbook: EXIT,
    meaning: 'The span of a `run` or `rotate` that exited 1 (some keys failed).',
  },
  KR_EXIT_2: {
    severity: 'error',
    retryable: false,
    runbook: EXIT,
    meaning: 'The span of a `run` or `rotate` that exited 2 (usage or configuration error).',
  },
  KR_EXIT_3: {
    severity: 'error',
    retryable: true,
    runbook: EXIT,
    meaning: 'The span of a `run` or `rotate` that exited 3 (aborted).',
  },
  KR_EXIT_4: {
    severity: 'warning',
    retryable: false,
    runbook: EXIT,
    meaning: 'The span of a `rotate --leaked-secret-stdin` that exited 4 (no entry holds the value).',
  },
  KR_GITHUB_BAD_ANSWER: {
    severity: 'error',
    retryable: false,
    runbook: GITHUB,
    meaning: 'GitHub answered with a body that is not JSON.',
  },
  KR_GITHUB_NO_SECRET: {
    severity: 'error',
    retryable: false,
    runbook: GITHUB,
    meaning: "GitHub's alert answer carries no secret (the token may see the alert, not its secret).",
  },
  KR_GITHUB_REFUSED: {
    severity: 'error',
    retryable: false,
    runbook: GITHUB,
    meaning: 'GitHub answered a 4xx other than 429.',
  },
  KR_GITHUB_UNAVAILABLE: {
    severity: 'error',
    retryable: true,
    runbook: GITHUB,
    meaning: 'GitHub answered 5xx or 429.',
  },
  KR_GITHUB_UNREACHABLE: {
    severity: 'error',
    retryable: true,
    runbook: GITHUB,
    meaning: 'GitHub did not answer (network error, timeout).',
  },
  KR_KEY_QUARANTINED: {
    severity: 'critical',
    retryable: false,
    runbook: 'runbook.md#quarantined-keys',
    meaning:
      'A key reached failures.quarantineAfter consecutive failures: no automatic attempts until a person acts.',
  },
  KR_KEY_RECOVERED: {
    severity: 'warning',
    retryable: false,
    runbook: 'runbook.md#backoff-quarantine-and-recovery-kr_key_quarantined-kr_key_recovered',
    meaning: "A success ended a key's failure streak that had alerted.",
  },
  KR_LAUNCHER_FAILED: {
    severity: 'error',
    retryable: false,
    runbook: LEAK_FAILED,
    meaning:
      "The daemon's launcher threw while starting a leak report's rotation; the key's outcome is unknown.",
  },
  KR_LAUNCHER_NO_OUTCOME: {
    severity: 'error',
    retryable: false,
    runbook: LEAK_FAILED,
    meaning:
      "A leak report's rotation run stopped without an outcome for its key (the run's own alert says why).",
  },
  KR_LEADER_API_ERROR: {
    severity: 'warning',
    retryable: true,
    runbook: LEADER,
    meaning:
      'The API server answered the leader election with an error status other than 401, 403 or 409: this replica does not lead until it can.',
  },
  KR_LEADER_CONFLICT: {
    severity: 'info',
    retryable: true,
    runbook: LEADER,
    meaning:
      "Another replica wrote the Lease between this one's read and write (409): it lost the race and stays a follower.",
  },
  KR_LEADER_FORBIDDEN: {
    severity: 'error',
    retryable: false,
    runbook: LEADER,
    meaning:
      "The API server refused keyroll's service account the Lease (401/403): the Role does not grant get and update on it.",
  },
  KR_LEADER_LOST: {
    severity: 'warning',
    retryable: true,
    runbook: LEADER,
    meaning:
      'The leader could not renew its Lease within the renew deadline, or saw another holder: it stopped starting work.',
  },
  KR_LEADER_UNREACHABLE: {
    severity: 'warning',
    retryable: true,
    runbook: LEADER,
    meaning:
      'The API server did not answer the leader election within its deadline, or could not be reached.',
  },
  KR_LEAK_ALERT_ONLY: {
    severity: 'critical',
    retryable: false,
    runbook: 'runbook.md#a-secret-leaked',
    meaning: 'A leak report names a key that keyroll may only alert on; a person rotates it.',
  },
  KR_LEAK_OPEN: {
    severity: 'error',
    retryable: true,
    runbook: 'daemon.md#reconcile-open-leak-alerts',
    meaning:
      "The span of a leak report left open at the scanner (not every key's leaked value was proven dead).",
  },
  KR_LEAK_STILL_ALIVE: {
    severity: 'critical',
    retryable: false,
    runbook: LEAK_FAILED,
    meaning: 'After the leak rotation the API still accepted the leaked value.',
  },
  KR_LEAK_UNPROVEN: {
    severity: 'error',
    retryable: true,
    runbook: LEAK_FAILED,
    meaning: 'After the leak rotation the API gave no answer that says whether the leaked value is dead.',
  },
  KR_LEAK_VALUE_NEEDED: {
    severity: 'critical',
    retryable: false,
    runbook: 'runbook.md#gitguardian',
    meaning: 'A GitGuardian report without the leaked value: the key cannot be found from it.',
  },
  KR_LOCK_LOST: {
    severity: 'critical',
    retryable: false,
    runbook: 'runbook.md#clearing-a-stale-lock',
    meaning: 'This runner no longer holds the key lock: another runner took the key over.',
  },
  KR_METRICS_PUSH_FAILED: {
    severity: 'warning',
    retryable: true,
    runbook: 'metrics.md#the-pushgateway-export',
    meaning: "The Pushgateway did not take a run's metrics.",
  },
  KR_NATIVE_API_CREDENTIAL_UNREADABLE: {
    severity: 'critical',
    retryable: false,
    runbook: 'aws-native.md#keyrolls-own-api-credential',
    meaning:
      "The rotation function could not read keyroll's API credential from the secret KEYROLL_API_TOKEN_SECRET_ARN names.",
  },
  KR_NATIVE_ARN_MISMATCH: {
    severity: 'error',
    retryable: false,
    runbook: 'aws-native.md#which-secret-an-event-names',
    meaning:
      "The event's secret has an entry's name but another partition, region or account than its destination.",
  },
  KR_NATIVE_EVENT_INVALID: {
    severity: 'error',
    retryable: false,
    runbook: 'aws-native.md#the-four-steps',
    meaning: 'The rotation function got an event that is not a Secrets Manager rotation event.',
  },
  KR_NATIVE_NOT_CONFIGURED: {
    severity: 'error',
    retryable: false,
    runbook: 'aws-native.md#which-entries',
    meaning: 'No aws-native entry of the policy names the secret of the event.',
  },
  KR_NATIVE_NOT_ROLLED: {
    severity: 'error',
    retryable: true,
    runbook: NATIVE_STEP,
    meaning:
      'createSecret decided not to roll (another runner holds the lock, the minimum interval, consumerRefresh).',
  },
  KR_NATIVE_NO_PENDING: {
    severity: 'error',
    retryable: false,
    runbook: NATIVE_STEP,
    meaning: "The rotation's new value is not, or no longer, at the version Secrets Manager names.",
  },
  KR_NATIVE_PENDING_REJECTED: {
    severity: 'error',
    retryable: false,
    runbook: NATIVE_STEP,
    meaning: 'testSecret: the API refuses the new value.',
  },
  KR_NATIVE_VALUE_LOST: {
    severity: 'critical',
    retryable: false,
    runbook: NATIVE_STEP,
    meaning:
      'A repeated createSecret found its intent marker but no value: the roll may have happened, its put never landed.',
  },
  KR_POLICY_INVALID: {
    severity: 'error',
    retryable: false,
    runbook: POLICY,
    meaning: 'The policy does not pass its schema or its semantic rules.',
  },
  KR_POLICY_SYNTAX: {
    severity: 'error',
    retryable: false,
    runbook: POLICY,
    meaning: 'The policy is not valid YAML or JSON.',
  },
  KR_POLICY_UNREADABLE: {
    severity: 'error',
    retryable: false,
    runbook: POLICY,
    meaning: 'The policy file cannot be read, or is not UTF-8 text.',
  },
  KR_RECOVERED_INTENT: {
    severity: 'warning',
    retryable: false,
    runbook: RECOVERED,
    meaning: 'A run died mid-rotation; the stored secret still works and the leftover marker was repaired.',
  },
  KR_RECOVERED_LEAK: {
    severity: 'warning',
    retryable: false,
    runbook: RECOVERED,
    meaning:
      'A leak rotation died before storing its secret, so the stored secret still worked because it was the leaked value; the key was rolled as a leak and the leaked value proven dead.',
  },
  KR_RECOVERED_REROLL: {
    severity: 'warning',
    retryable: false,
    runbook: RECOVERED,
    meaning: 'A run died mid-rotation and the stored secret was dead; the key was rolled again and stored.',
  },
  KR_RECOVERY_REPAIR_FAILED: {
    severity: 'error',
    retryable: true,
    runbook: RECOVERED,
    meaning: 'The stored secret works, but copying it to the other destinations failed.',
  },
  KR_REF_UNRESOLVED: {
    severity: 'error',
    retryable: false,
    runbook: 'policy.md#references-never-secrets',
    meaning: 'A secret reference (env:NAME, file:/path) could not be read.',
  },
  KR_REPLAY_RECORD: {
    severity: 'error',
    retryable: true,
    runbook: 'daemon.md#the-signed-trigger-post-v1rotations',
    meaning: 'The replay record of a signed endpoint could not be read or written.',
  },
  KR_RUN_API_UNREACHABLE: {
    severity: 'critical',
    retryable: true,
    runbook: RUN_STOPPED,
    meaning: 'The run stopped: the API did not answer the credential check after 3 attempts.',
  },
  KR_RUN_CREDENTIAL_REFUSED: {
    severity: 'critical',
    retryable: false,
    runbook: RUN_STOPPED,
    meaning: "The run stopped: keyroll's own API credential was refused (401); no key is rolled after that.",
  },
  KR_RUN_CREDENTIAL_UNAVAILABLE: {
    severity: 'critical',
    retryable: false,
    runbook: RUN_STOPPED,
    meaning: "The run stopped: keyroll's API credential could not be obtained or used.",
  },
  KR_RUN_LOCK_CONTENTION: {
    severity: 'warning',
    retryable: true,
    runbook: RUN_STOPPED,
    meaning: 'The run stopped: every key in scope was locked by another runner.',
  },
  KR_RUN_LOST_LEADERSHIP: {
    severity: 'warning',
    retryable: true,
    runbook: LEADER,
    meaning:
      "The run stopped: this replica stopped leading before every key was handled; the next leader's sweep takes the rest.",
  },
  KR_RUN_SHUTDOWN: {
    severity: 'warning',
    retryable: true,
    runbook: RUN_STOPPED,
    meaning: 'The run stopped: a shutdown came before every key was handled.',
  },
  KR_STORE_FAILED: {
    severity: 'critical',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning:
      'The rolled secret could not be stored in every destination (it went to a fallback, the escrow, or nowhere).',
  },
  KR_UNEXPECTED: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'An error without a code of its own (a bug, or a library error keyroll does not map).',
  },
  KR_USAGE: {
    severity: 'error',
    retryable: false,
    runbook: EXIT,
    meaning: 'A wrong flag, argument or configuration value (exit 2): nothing was touched.',
  },
  KR_VERIFY_API_REJECTED: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'At verify, the API refused the freshly stored secret.',
  },
  KR_VERIFY_DIGEST_MISMATCH: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'At verify, reading the stored secret back gave another value.',
  },
  KR_VERIFY_FAILED: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning: 'Verification failed without a code of its own.',
  },
  KR_VERIFY_PREVIOUS_DEAD: {
    severity: 'error',
    retryable: false,
    runbook: ONE_KEY_FAILED,
    meaning:
      "At verify of a slot entry, the previous active slot's secret (which consumers may still hold) no longer works.",
  },
} as const satisfies Record<`KR_${string}`, ErrorCodeInfo>;

/** A code of the catalogue: what KeyrollError and every error class take. */
export type ErrorCode = keyof typeof ERROR_CODES;

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}
