// A rule the JSON schema alone cannot state, said twice: in CEL for the API server
// (`x-kubernetes-validations`, so `kubectl apply` refuses the object) and as a TypeScript
// predicate for zod (so `keyroll validate` and the daemon refuse the same object with the same
// message). One list holds both, so the two cannot drift apart silently; the unit tests run
// each rule's both sides on the same objects.
import { z } from 'zod';

export interface CrossFieldRule<T> {
  /** The CEL expression; `self` is the object the rule sits on. */
  rule: string;
  message: string;
  /** The field the message is about, as the API server names it (`.consumerRefresh`). */
  fieldPath?: string;
  /** The same rule in TypeScript: true when the value keeps it. */
  holds: (value: T) => boolean;
}

/** What the CRD carries of a rule (the predicate stays in TypeScript). */
export interface CelValidation {
  rule: string;
  message: string;
  fieldPath?: string;
}

export function celValidations<T>(rules: readonly CrossFieldRule<T>[]): CelValidation[] {
  return rules.map(({ rule, message, fieldPath }) => ({
    rule,
    message,
    ...(fieldPath === undefined ? {} : { fieldPath }),
  }));
}

/** `schema` refined by `rules` (an issue at the rule's field for each broken one) and carrying them as CEL. */
export function withRules<S extends z.ZodType>(schema: S, rules: readonly CrossFieldRule<z.output<S>>[]) {
  return schema
    .superRefine((value, ctx) => {
      for (const rule of rules) {
        if (rule.holds(value)) continue;
        const path = rule.fieldPath === undefined ? [] : rule.fieldPath.slice(1).split('.');
        ctx.addIssue({ code: 'custom', path, message: rule.message });
      }
    })
    .meta({ 'x-kubernetes-validations': celValidations(rules) });
}
