// The extraction the metric cross-check relies on: it must find every metric and label an
// expression names, whatever PromQL wraps them in, and refuse what is not PromQL.
import { describe, expect, it } from 'vitest';
import { exportedNames, promqlNames, PromqlSyntaxError } from './promql-names.ts';

describe('promqlNames', () => {
  it('finds the metric and matcher labels of a plain selector', () => {
    expect(promqlNames('keyroll_keys_overdue{job="keyroll", pod=~"k.*"} > 0')).toEqual({
      selectors: [{ metric: 'keyroll_keys_overdue', labels: ['job', 'pod'] }],
      groupingLabels: [],
    });
  });

  it('looks inside functions, range selectors, aggregations and binary operators', () => {
    const names = promqlNames(
      'histogram_quantile(0.9, sum by (le, step) (rate(a_bucket{command=""}[$__rate_interval]))) / on (key_id) group_left (shard) max without (instance) (b)',
    );
    expect(names.selectors).toEqual([
      { metric: 'a_bucket', labels: ['command'] },
      { metric: 'b', labels: [] },
    ]);
    expect(names.groupingLabels).toEqual(['le', 'step', 'key_id', 'shard', 'instance']);
  });

  it('finds every operand of unless / or and absent()', () => {
    const names = promqlNames(
      'max by (job) (max_over_time(x[1h])) unless max by (job) (y) or absent(z{a="1"})',
    );
    expect(names.selectors.map((s) => s.metric)).toEqual(['x', 'y', 'z']);
    expect(names.selectors[2]?.labels).toEqual(['a']);
  });

  it('reads a metric named through __name__ or quoted, and quoted label names', () => {
    expect(promqlNames('{__name__="keyroll_alerts_total", sink="x"}').selectors).toEqual([
      { metric: 'keyroll_alerts_total', labels: ['sink'] },
    ]);
    expect(promqlNames('{"keyroll_alerts_total", "sink"="x"}').selectors).toEqual([
      { metric: 'keyroll_alerts_total', labels: ['sink'] },
    ]);
  });

  it('refuses what is not PromQL, and a selector with no metric', () => {
    expect(() => promqlNames('sum by (result (keyroll_rotations_total)')).toThrow(PromqlSyntaxError);
    expect(() => promqlNames('rate(keyroll_rotations_total[$__bogus])')).toThrow(PromqlSyntaxError);
    expect(() => promqlNames('{job="keyroll"}')).toThrow(PromqlSyntaxError);
  });
});

describe('exportedNames', () => {
  it('lists families with and without samples, histogram series and their labels', () => {
    const names = exportedNames(
      [
        '# HELP c x',
        '# TYPE c counter',
        '',
        '# TYPE h histogram',
        'h_bucket{le="1",step="roll"} 0',
        'h_sum{step="roll"} 0',
        'h_count{step="roll"} 0',
        '# TYPE g gauge',
        'g{key_id="a \\"b\\""} 1',
        '',
      ].join('\n'),
      ['job'],
    );
    expect([...names.keys()]).toEqual(['c', 'h_bucket', 'h_sum', 'h_count', 'g']);
    expect(names.get('c')).toEqual(new Set(['job']));
    expect(names.get('h_bucket')).toEqual(new Set(['job', 'le', 'step']));
    expect(names.get('g')).toEqual(new Set(['job', 'key_id']));
  });
});
