// The PolicyError a policy text is refused with (`file:line path: sentence`), for tests of what
// the policy refuses; fails the test when the text loads.
import { PolicyError } from '../../src/policy/errors.ts';
import { parsePolicy } from '../../src/policy/load.ts';

export function policyRejection(text: string, file = 'policy.yaml'): PolicyError {
  try {
    parsePolicy(text, file);
  } catch (error) {
    if (error instanceof PolicyError) return error;
    throw error;
  }
  throw new Error('expected the policy to be rejected');
}
