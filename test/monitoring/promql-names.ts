// What a PromQL expression names, read with Prometheus' own grammar (@prometheus-io/lezer-promql,
// the parser of Prometheus' web UI): each vector selector's metric and the labels its matchers
// name, and the labels of `by`, `without`, `on`, `ignoring` and `group_left/right`. Used by the
// metric cross-check (metric-names.test.ts) on every dashboard query and rule expression.
import { parser } from '@prometheus-io/lezer-promql';
import type { SyntaxNode } from '@lezer/common';

export interface Selector {
  metric: string;
  /** Label names its matchers name (never `__name__`). */
  labels: string[];
}

export interface ExpressionNames {
  selectors: Selector[];
  /** Labels named by grouping and vector-matching clauses. */
  groupingLabels: string[];
}

export class PromqlSyntaxError extends Error {
  override name = 'PromqlSyntaxError';
}

/** Grafana's interval variables, which are not PromQL: replaced by a duration before parsing. */
export function withoutGrafanaVariables(expr: string): string {
  return expr.replace(/\$__(rate_interval|interval|range)\b/g, '5m');
}

const text = (expr: string, node: SyntaxNode): string => expr.slice(node.from, node.to);

/** A label name as written: bare, or quoted ("a.b"), as Prometheus 3 allows. */
function labelName(expr: string, node: SyntaxNode): string {
  const raw = text(expr, node);
  return raw.startsWith('"') ? (JSON.parse(raw) as string) : raw;
}

function selectorOf(expr: string, node: SyntaxNode): Selector {
  let metric =
    node.getChild('Identifier') === null ? undefined : text(expr, node.getChild('Identifier') as SyntaxNode);
  const labels: string[] = [];
  const matchers = node.getChild('LabelMatchers');
  for (let matcher = matchers?.firstChild ?? null; matcher !== null; matcher = matcher.nextSibling) {
    // `{"metric_name", …}`: a quoted name standing alone is the metric (Prometheus 3).
    if (matcher.name === 'QuotedLabelName') {
      metric = labelName(expr, matcher);
      continue;
    }
    if (!matcher.name.endsWith('LabelMatcher')) continue;
    const nameNode = matcher.getChild('LabelName') ?? matcher.getChild('QuotedLabelName');
    if (nameNode === null) continue;
    const name = labelName(expr, nameNode);
    if (name === '__name__') {
      const value = matcher.getChild('StringLiteral');
      if (value !== null) metric = JSON.parse(text(expr, value)) as string;
    } else {
      labels.push(name);
    }
  }
  if (metric === undefined)
    throw new PromqlSyntaxError(`a selector without a metric name: ${text(expr, node)}`);
  return { metric, labels };
}

/** Parses `expr` (Grafana's interval variables allowed) and lists what it names; throws PromqlSyntaxError. */
export function promqlNames(source: string): ExpressionNames {
  const expr = withoutGrafanaVariables(source);
  const tree = parser.parse(expr);
  const selectors: Selector[] = [];
  const groupingLabels: string[] = [];
  let error: string | undefined;
  tree.iterate({
    enter: (ref) => {
      if (ref.type.isError)
        error ??= `${JSON.stringify(expr.slice(Math.max(0, ref.from - 20), ref.to + 20))} at ${ref.from}`;
    },
  });
  if (error !== undefined) throw new PromqlSyntaxError(`not PromQL: ${error}`);
  tree.iterate({
    enter: (ref) => {
      if (ref.name === 'VectorSelector') {
        selectors.push(selectorOf(expr, ref.node));
        return false;
      }
      if (ref.name === 'GroupingLabels') {
        for (const label of ref.node.getChildren('LabelName')) groupingLabels.push(labelName(expr, label));
        for (const label of ref.node.getChildren('QuotedLabelName'))
          groupingLabels.push(labelName(expr, label));
        return false;
      }
      return undefined;
    },
  });
  return { selectors, groupingLabels };
}

/** Metric name → label names, from a Prometheus text exposition (a /metrics scrape or a push). */
export function exportedNames(
  exposition: string,
  extraLabels: readonly string[] = [],
): Map<string, Set<string>> {
  const names = new Map<string, Set<string>>();
  for (const line of exposition.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type?.[1] !== undefined) {
      // A family with no sample yet (a counter never incremented) still names itself.
      const family =
        type[2] === 'histogram'
          ? ['_bucket', '_sum', '_count'].map((suffix) => `${type[1]}${suffix}`)
          : [type[1]];
      for (const name of family) if (!names.has(name)) names.set(name, new Set(extraLabels));
      continue;
    }
    if (line === '' || line.startsWith('#')) continue;
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line);
    if (sample?.[1] === undefined) continue;
    const labels = names.get(sample[1]) ?? new Set(extraLabels);
    for (const match of (sample[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="(?:[^"\\]|\\.)*"/g))
      if (match[1] !== undefined) labels.add(match[1]);
    names.set(sample[1], labels);
  }
  return names;
}
