// Small validation toolkit for the config: every check records an issue that names the field path and the bad
// value, and returns undefined instead of throwing, so one pass collects every error in the file.

export type Path = (string | number)[];

export interface ConfigIssue {
  /** bgp.peers[1].holdTime */
  path: string;
  message: string;
  /** 1-based line in the source, when known. */
  line?: number;
}

export function formatPath(path: Path): string {
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : s ? `.${p}` : p;
  return s || '(top level)';
}

/** A short rendering of a bad value for an error message. */
export function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  let s: string;
  try {
    s = JSON.stringify(v);
  } catch {
    s = String(v);
  }
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}

/** Edit distance counting a swap of two neighbouring letters as one edit (the commonest typo). */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The known name a typo most likely meant: same letters in another case, else within a small edit distance. */
export function suggest(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const sameCase = known.find((k) => k.toLowerCase() === lower);
  if (sameCase) return sameCase;
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const dist = editDistance(lower, k.toLowerCase());
    if (dist < bestD) [best, bestD] = [k, dist];
  }
  return bestD <= Math.max(1, Math.min(3, Math.floor(name.length / 3))) ? best : undefined;
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export class Checker {
  readonly issues: ConfigIssue[] = [];

  constructor(private readonly locate: (path: Path) => number | undefined = () => undefined) {}

  fail(path: Path, message: string): undefined {
    this.issues.push({ path: formatPath(path), message, line: this.locate(path) });
    return undefined;
  }

  /** `must be <what>, got <value>` */
  bad(path: Path, what: string, v: unknown): undefined {
    return this.fail(path, `must be ${what}, got ${show(v)}`);
  }

  /**
   * A mapping with only the given keys: unknown keys are reported (with a did-you-mean), required ones that are
   * absent too. Returns the object, or undefined when v is not a mapping.
   */
  object(path: Path, v: unknown, known: readonly string[], required: readonly string[] = []): Record<string, unknown> | undefined {
    if (!isPlainObject(v)) return this.bad(path, 'a mapping', v);
    for (const k of Object.keys(v)) {
      if (known.includes(k)) continue;
      const hint = suggest(k, known);
      this.issues.push({
        path: formatPath([...path, k]),
        message: `unknown field${hint ? ` (did you mean ${hint}?)` : ` (known: ${known.join(', ')})`}`,
        line: this.locate([...path, k]),
      });
    }
    for (const k of required) if (v[k] === undefined || v[k] === null) this.fail([...path, k], 'required');
    return v;
  }

  /** A list; null or absent gives `def`. Items are checked by `item`, which returns undefined on error. */
  list<T>(path: Path, v: unknown, item: (path: Path, v: unknown, i: number) => T | undefined, def: T[] = []): T[] {
    if (v === undefined || v === null) return def;
    if (!Array.isArray(v)) {
      this.bad(path, 'a list', v);
      return def;
    }
    const out: T[] = [];
    v.forEach((x, i) => {
      const r = item([...path, i], x, i);
      if (r !== undefined) out.push(r);
    });
    return out;
  }

  int(path: Path, v: unknown, min: number, max: number): number | undefined {
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) return this.bad(path, `${min}..${max}`, v);
    return v;
  }

  bool(path: Path, v: unknown): boolean | undefined {
    if (typeof v !== 'boolean') return this.bad(path, 'true or false', v);
    return v;
  }

  string(path: Path, v: unknown, nonEmpty = true): string | undefined {
    if (typeof v !== 'string' || (nonEmpty && v.trim() === '')) return this.bad(path, nonEmpty ? 'a non-empty string' : 'a string', v);
    return v;
  }

  oneOf<T extends string>(path: Path, v: unknown, choices: readonly T[]): T | undefined {
    if (typeof v !== 'string' || !choices.includes(v as T)) return this.bad(path, `one of ${choices.join(', ')}`, v);
    return v as T;
  }

  /** Runs fn on a value that is present; absent (or null when nullIsAbsent) gives def without an issue. */
  opt<T>(v: unknown, def: T, fn: (v: unknown) => T | undefined, nullIsAbsent = false): T | undefined {
    if (v === undefined || (nullIsAbsent && v === null)) return def;
    return fn(v);
  }
}
