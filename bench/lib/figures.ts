// What every benchmark hands back to the runner: the headline figures with their goals (one
// table row each) and the details that go into bench/results/latest.json beside them.

export type GoalOperator = '<=' | '<' | '>=' | '==';

export interface Goal {
  op: GoalOperator;
  target: number;
}

export interface Figure {
  /** The JSON name from the issue, e.g. exposureWindowRatioP99. */
  name: string;
  value: number;
  unit: string;
  goal?: Goal;
}

export interface BenchResult {
  figures: Figure[];
  /** Raw figures and conditions (per backend, sample counts, settings) for latest.json. */
  details: Record<string, unknown>;
  /** Conditions a reader needs to judge the figures, printed under the table. */
  notes?: string[];
}

export function meets(value: number, goal: Goal): boolean {
  switch (goal.op) {
    case '<=':
      return value <= goal.target;
    case '<':
      return value < goal.target;
    case '>=':
      return value >= goal.target;
    case '==':
      return value === goal.target;
  }
}

export function describeGoal(goal: Goal): string {
  return `${goal.op === '==' ? '=' : goal.op} ${String(goal.target)}`;
}
