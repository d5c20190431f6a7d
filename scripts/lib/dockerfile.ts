// A small Dockerfile reader for the static image checks (there is no Docker engine in CI) and
// for the benchmarks, which run keyroll with the image's ENTRYPOINT flags and ENV. It handles what BuildKit's parser does for the instructions we use: comments, line
// continuations (with comment lines inside them dropped), `--flag=value` options, and the JSON
// exec form. It does not expand variables or heredocs; a Dockerfile that needs them fails
// these tests loudly rather than being misread.

export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, USER, ENTRYPOINT, … */
  keyword: string;
  /** `--name=value` options before the arguments (e.g. COPY --from=build). */
  flags: Record<string, string>;
  /** The arguments after the flags, continuations joined with a space. */
  args: string;
  /** 1-based line the instruction starts on. */
  line: number;
}

export interface Stage {
  /** Image reference of the FROM line, e.g. node:24-bookworm-slim. */
  image: string;
  /** The `AS name` of the FROM line, when given. */
  name?: string;
  /** Instructions after the FROM, up to the next FROM. */
  instructions: Instruction[];
}

export interface Dockerfile {
  /** Instructions before the first FROM (ARG only, in a valid file). */
  preamble: Instruction[];
  stages: Stage[];
}

const continuation = /\\\s*$/;

function logicalLines(text: string): { text: string; line: number }[] {
  const out: { text: string; line: number }[] = [];
  let current: { parts: string[]; line: number } | undefined;
  text.split(/\r?\n/).forEach((raw, index) => {
    const trimmed = raw.trim();
    if (trimmed === '' && current === undefined) return;
    // Comment lines are dropped, also in the middle of a continued instruction.
    if (trimmed.startsWith('#')) return;
    const body = raw.replace(continuation, '');
    current ??= { parts: [], line: index + 1 };
    current.parts.push(body.trim());
    if (!continuation.test(raw)) {
      out.push({ text: current.parts.filter((part) => part !== '').join(' '), line: current.line });
      current = undefined;
    }
  });
  if (current !== undefined)
    throw new Error(`Dockerfile line ${current.line}: continuation runs past the end of the file`);
  return out;
}

function parseInstruction(text: string, line: number): Instruction {
  const match = /^(\S+)\s*(.*)$/.exec(text);
  if (match === null) throw new Error(`Dockerfile line ${line}: cannot read "${text}"`);
  const keyword = match[1]!.toUpperCase();
  let rest = match[2]!;
  const flags: Record<string, string> = {};
  for (
    let flag = /^--([a-z-]+)(?:=(\S*))?\s*/.exec(rest);
    flag !== null;
    flag = /^--([a-z-]+)(?:=(\S*))?\s*/.exec(rest)
  ) {
    flags[flag[1]!] = flag[2] ?? 'true';
    rest = rest.slice(flag[0].length);
  }
  return { keyword, flags, args: rest.trim(), line };
}

export function parseDockerfile(text: string): Dockerfile {
  const file: Dockerfile = { preamble: [], stages: [] };
  for (const { text: logical, line } of logicalLines(text)) {
    const instruction = parseInstruction(logical, line);
    if (instruction.keyword === 'FROM') {
      const from = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(instruction.args);
      if (from === null) throw new Error(`Dockerfile line ${line}: cannot read FROM "${instruction.args}"`);
      file.stages.push({
        image: expandArgs(from[1]!, file.preamble, line),
        ...(from[2] === undefined ? {} : { name: from[2] }),
        instructions: [],
      });
    } else if (file.stages.length === 0) {
      file.preamble.push(instruction);
    } else {
      file.stages.at(-1)!.instructions.push(instruction);
    }
  }
  return file;
}

/** The JSON exec form of ENTRYPOINT/CMD/RUN, or undefined for the shell form. */
export function execForm(instruction: Instruction): string[] | undefined {
  if (!instruction.args.startsWith('[')) return undefined;
  const parsed: unknown = JSON.parse(instruction.args);
  if (!Array.isArray(parsed) || !parsed.every((item): item is string => typeof item === 'string')) {
    throw new Error(`Dockerfile line ${instruction.line}: exec form must be a JSON array of strings`);
  }
  return parsed;
}

/** Source paths of a COPY/ADD (every argument but the last, the destination). */
export function copySources(instruction: Instruction): string[] {
  const words = execForm(instruction) ?? instruction.args.split(/\s+/);
  return words.slice(0, -1);
}

/** ENV in both forms: `ENV A=1 B=2` and the legacy `ENV A 1`. */
export function envAssignments(instruction: Instruction): Record<string, string> {
  const args = instruction.args;
  if (!/^[A-Za-z_][A-Za-z0-9_]*=/.test(args)) {
    const legacy = /^(\S+)\s+(.*)$/.exec(args);
    return legacy === null ? {} : { [legacy[1]!]: legacy[2]! };
  }
  const env: Record<string, string> = {};
  for (const pair of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
    const value = pair[2]!;
    env[pair[1]!] = value.startsWith('"') ? (JSON.parse(value) as string) : value;
  }
  return env;
}

/**
 * A FROM's `${NAME}` / `$NAME` replaced by the default of the `ARG NAME=value` before the first
 * FROM, as BuildKit does when no --build-arg overrides it. A name without a default fails loudly.
 */
function expandArgs(image: string, preamble: readonly Instruction[], line: number): string {
  return image.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (_, braced: string | undefined, bare: string | undefined) => {
      const name = braced ?? bare ?? '';
      const arg = preamble.find(
        (instruction) => instruction.keyword === 'ARG' && instruction.args.startsWith(`${name}=`),
      );
      if (arg === undefined)
        throw new Error(
          `Dockerfile line ${line}: FROM uses $${name}, which has no ARG default before the first FROM`,
        );
      return arg.args.slice(name.length + 1).replace(/^"(.*)"$/, '$1');
    },
  );
}
