// Which entries AWS Secrets Manager may rotate natively, with keyroll as the rotation function
// (`scheduler: aws-native`, src/lambda/). The four steps leave the new value in AWSPENDING while
// consumers read AWSCURRENT, and move AWSCURRENT only at the last step: that is without an outage
// only when the roll leaves AWSCURRENT's value alive, i.e. a two-slot entry that rolls its standby
// (invariant 10, AWS's "alternating users" strategy).
import type { DocPath } from './issue-text.ts';
import type { PolicyDocument } from './schema.ts';

export function checkNativeRotation(
  doc: PolicyDocument,
  index: number,
  add: (path: DocPath, message: string) => void,
): void {
  const key = doc.keys[index];
  if (key?.scheduler !== 'aws-native') return;
  const path: DocPath = ['keys', index, 'scheduler'];
  if (key.slots === undefined) {
    add(
      path,
      'aws-native needs a slot entry (slots: [KEY_A, KEY_B]): a single key dies at the roll in createSecret, so consumers would read a dead AWSCURRENT until finishSecret moves it; rotate single keys with keyroll run or the daemon',
    );
  }
  if (key.destinations.length !== 1) {
    add(
      path,
      'aws-native needs exactly one destination, the AWS secret that Secrets Manager rotates; its rotation function writes nowhere else',
    );
    return;
  }
  // The raw document: zod's min(1) does not narrow the list's type, so the primary may be absent here.
  const [destination] = key.destinations;
  const backend =
    destination === undefined
      ? undefined
      : Object.hasOwn(doc.backends, destination.backend)
        ? doc.backends[destination.backend]
        : undefined;
  if (backend !== undefined && backend.kind !== 'aws') {
    add(
      path,
      `aws-native needs an aws destination; backend ${JSON.stringify(destination?.backend)} is kind ${backend.kind}`,
    );
  }
}
