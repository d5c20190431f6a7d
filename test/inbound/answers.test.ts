// A refusal means one HTTP status on every signed endpoint; it is counted, audited within the
// budget, and answered with the endpoint's own message (and details where the sender may see them).
import { describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import { refuse, REFUSAL_STATUS, singleHeader, type InboundRequest } from '../../src/inbound/answers.ts';
import { RejectionAudit } from '../../src/inbound/rejection-audit.ts';

const request: InboundRequest = { headers: {}, body: Buffer.from('{}'), remoteAddress: '192.0.2.7' };

function budget(perWindow = 10): {
  rejections: RejectionAudit;
  audit: ReturnType<typeof createMemoryAuditLog>;
  counted: string[];
} {
  const audit = createMemoryAuditLog();
  const counted: string[] = [];
  const rejections = new RejectionAudit({
    audit: () => audit,
    perWindow,
    nowMs: () => 0,
    counted: (why) => counted.push(why),
  });
  return { rejections, audit, counted };
}

describe('refuse', () => {
  it('answers the status of the code with the message and details, and audits the caller and details', () => {
    const { rejections, audit, counted } = budget();
    const answer = refuse(rejections, request, 'unknown-keys', {
      message: 'not in the policy',
      caller: 'alice',
      details: { unknown: ['k9'] },
    });
    expect(answer).toEqual({
      status: 400,
      body: { error: { code: 'unknown-keys', message: 'not in the policy', details: { unknown: ['k9'] } } },
    });
    expect(counted).toEqual(['unknown-keys']);
    expect(audit.eventsNamed('trigger.rejected')).toEqual([
      expect.objectContaining({
        why: 'unknown-keys',
        status: 400,
        remoteAddress: '192.0.2.7',
        caller: 'alice',
        details: { unknown: ['k9'] },
      }),
    ]);
  });

  it('keeps audit-only details out of the answer', () => {
    const { rejections, audit } = budget();
    const answer = refuse(rejections, request, 'replay', {
      message: 'already received',
      auditDetails: { endpoint: '/v1/leaks/github' },
    });
    expect(answer).toEqual({ status: 409, body: { error: { code: 'replay', message: 'already received' } } });
    expect(audit.eventsNamed('trigger.rejected')).toEqual([
      expect.objectContaining({ why: 'replay', details: { endpoint: '/v1/leaks/github' } }),
    ]);
  });

  it('counts every refusal but audits only the budget one by one', () => {
    const { rejections, audit, counted } = budget(2);
    for (let i = 0; i < 5; i++) refuse(rejections, request, 'bad-signature', { message: 'no' });
    rejections.flush();
    expect(counted).toHaveLength(5);
    expect(audit.eventsNamed('trigger.rejected')).toHaveLength(2);
    expect(audit.eventsNamed('trigger.rejected_suppressed')).toEqual([
      expect.objectContaining({ suppressed: 3, byWhy: { 'bad-signature': 3 } }),
    ]);
  });
});

describe('REFUSAL_STATUS', () => {
  it('answers signature problems 401, replays 409, record trouble 503', () => {
    expect([
      REFUSAL_STATUS['bad-signature'],
      REFUSAL_STATUS['stale-timestamp'],
      REFUSAL_STATUS.replay,
      REFUSAL_STATUS['replay-record-full'],
    ]).toEqual([401, 401, 409, 503]);
  });
});

describe('singleHeader', () => {
  it('takes a header sent once; a repeated one is no value', () => {
    expect(singleHeader('a')).toBe('a');
    expect(singleHeader(['a'])).toBe('a');
    expect(singleHeader(['a', 'b'])).toBeUndefined();
    expect(singleHeader(undefined)).toBeUndefined();
  });
});
