// One invocation of the rotation function in a process of its own, as a Lambda instance runs it
// (the event as the first argument, the policy at KEYROLL_POLICY, audit lines on stdout), so a
// fault case can kill the function mid-step (aws-native.test.ts). Started with spawnCli's `entry`.
import { handler } from '../../src/lambda/handler.ts';

await handler(JSON.parse(process.argv[2] ?? '{}'));
