// Plan tiers and what each one allows. The numbers come from the spec's Limits table; the
// choices the spec leaves open (free-plan rate, branding eligibility) are documented in
// docs/emulator.md.

export const PLANS = ['free', 'starter', 'pro', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

/** API-key calls per minute a key minted on this plan may make. Free keys cannot call at all. */
export const API_KEY_RATE_PER_MINUTE: Record<Plan, number> = {
  free: 0,
  starter: 600,
  pro: 1500,
  enterprise: 3000,
};

/** Plans on which `branding: none` (removing the service's branding) is allowed. */
export const BRANDING_NONE_PLANS: readonly Plan[] = ['pro', 'enterprise'];

export interface PlanHolder {
  plan: Plan;
  downgraded: boolean;
}

/** "API access with organization API keys requires the Starter plan or higher", and not downgraded. */
export function allowsApiKeys(org: PlanHolder): boolean {
  return !org.downgraded && org.plan !== 'free';
}

export function allowsBrandingNone(org: PlanHolder): boolean {
  return !org.downgraded && BRANDING_NONE_PLANS.includes(org.plan);
}
