// The rotate-now annotation's parts (src/crd/controller/rotate-now.ts): the value's reason and
// text, the CLI's minInterval rule (leak and compromise bypass it, nothing else), who asked (the
// field manager owning the annotation), a value settled once, the patch that removes it.
import { describe, expect, it } from 'vitest';
import { annotationPointer, removalPatch } from '../../../src/crd/controller/annotation-client.ts';
import {
  alreadySettled,
  parseRotateNow,
  requestedBy,
  rotateNowTrigger,
  settledOutcome,
} from '../../../src/crd/controller/rotate-now.ts';
import type { WatchedObject } from '../../../src/crd/watch/resource.ts';
import { failed, rotated } from './fixtures.ts';

describe('the rotate-now annotation', () => {
  it('reads "<reason>[: text]" with the reasons of keyroll rotate', () => {
    expect(parseRotateNow('leak: pasted in a ticket')).toEqual({
      reason: 'leak',
      text: 'pasted in a ticket',
    });
    expect(parseRotateNow('manual')).toEqual({ reason: 'manual' });
    expect(parseRotateNow(' plan-change :  INC-42 ')).toEqual({ reason: 'plan-change', text: 'INC-42' });
    expect(parseRotateNow('compromise:')).toEqual({ reason: 'compromise' });
    expect(parseRotateNow('scheduled')).toBeUndefined();
    expect(parseRotateNow('now please')).toBeUndefined();
    expect(parseRotateNow('')).toBeUndefined();
  });

  it('a leak or compromise bypasses minInterval as the CLI does; manual and plan-change do not', () => {
    const call = { object: 'billing/billing-api', requestedBy: 'kubectl-annotate' };
    expect(rotateNowTrigger({ ...call, reason: 'leak', text: 'INC-1' })).toMatchObject({
      reason: 'leak',
      force: true,
      ignoreSchedule: true,
      ticket: 'INC-1',
    });
    expect(rotateNowTrigger({ ...call, reason: 'compromise' }).force).toBe(true);
    expect(rotateNowTrigger({ ...call, reason: 'manual' })).toMatchObject({
      force: false,
      ignoreSchedule: true,
    });
    expect(rotateNowTrigger({ ...call, reason: 'plan-change' }).force).toBe(false);
    expect(rotateNowTrigger({ ...call, reason: 'manual' }).actor).toContain('kubectl-annotate');
  });

  it('who asked: the latest field manager owning the annotation, none when no entry owns it', () => {
    const object = {
      metadata: {
        name: 'billing-api',
        managedFields: [
          { manager: 'argocd-controller', time: '2026-11-29T08:00:00Z', fieldsV1: { 'f:spec': {} } },
          {
            manager: 'kubectl-annotate',
            time: '2026-11-29T09:00:00Z',
            fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:keyroll.io/rotate-now': {} } } },
          },
        ],
      },
    } as unknown as WatchedObject;
    expect(requestedBy(object)).toBe('kubectl-annotate');
    expect(requestedBy({ metadata: { name: 'x' } })).toBeUndefined();
  });

  it('a value settled in the status is not served again; another value is', () => {
    const object: WatchedObject = {
      status: { rotateNow: { value: 'leak: INC-1', settledAt: '2026-11-29T09:00:00Z', outcome: 'Rotated' } },
    };
    expect(alreadySettled(object, 'leak: INC-1')).toBe(true);
    expect(alreadySettled(object, 'leak: INC-2')).toBe(false);
    expect(alreadySettled({ status: { rotateNow: { value: 'leak: INC-1' } } }, 'leak: INC-1')).toBe(false);
  });

  it('removes the annotation only while it holds the served value (a JSON patch test)', () => {
    expect(annotationPointer('keyroll.io/rotate-now')).toBe('/metadata/annotations/keyroll.io~1rotate-now');
    expect(removalPatch('keyroll.io/rotate-now', 'manual')).toEqual([
      { op: 'test', path: '/metadata/annotations/keyroll.io~1rotate-now', value: 'manual' },
      { op: 'remove', path: '/metadata/annotations/keyroll.io~1rotate-now' },
    ]);
  });

  it('settles every outcome that decided, and leaves an aborted one for the next leader', () => {
    expect(settledOutcome(rotated())).toBe('Rotated');
    expect(settledOutcome(failed())).toBe('RotationFailed');
    expect(settledOutcome({ ...rotated(), result: 'skipped', detail: 'min-interval' } as never)).toBe(
      'Skipped',
    );
    expect(
      settledOutcome({ ...rotated(), result: 'aborted', detail: 'lost-leadership' } as never),
    ).toBeUndefined();
  });
});
