// The Pushgateway flags `run` and `rotate` share, beside their own --pushgateway <url>: where the
// gateway's credentials come from (a reference, not user:pass in the URL, which `ps` and the pod
// spec show) and the opt-in to plain http:// to another machine (src/http/transport.ts).
import type { Command } from 'commander';
import type { PushOptions } from '../metrics/public/pushgateway.ts';

export interface PushgatewayFlags {
  pushgatewayAuth?: string;
  pushgatewayAllowInsecureHttp?: boolean;
}

export function addPushgatewayOptions(command: Command): Command {
  return command
    .option(
      '--pushgateway-auth <ref>',
      'Pushgateway credentials from a reference, env:NAME or file:/path, holding user:password (basic auth) or a whole "Bearer ..." header value; env KEYROLL_PUSHGATEWAY_AUTH',
      process.env.KEYROLL_PUSHGATEWAY_AUTH,
    )
    .option(
      '--pushgateway-allow-insecure-http',
      'accept a plain http:// --pushgateway on another machine (credentials and metrics cross the network in clear)',
      false,
    );
}

export function pushgatewayOptions(flags: PushgatewayFlags): Pick<PushOptions, 'auth' | 'allowInsecureHttp'> {
  return {
    ...(flags.pushgatewayAuth ? { auth: flags.pushgatewayAuth } : {}),
    ...(flags.pushgatewayAllowInsecureHttp === true ? { allowInsecureHttp: true } : {}),
  };
}
