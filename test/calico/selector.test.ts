// Node selectors (Calico's full grammar): examples from the grammar, error positions, and a property that prints
// random expression trees as selector text and compares the parsed predicate with direct evaluation of the tree.
import t from 'tap';
import fc from 'fast-check';
import { parseSelector, SelectorError, type Labels } from '../../src/calico/selector.ts';

type T = Parameters<Parameters<typeof t.test>[0]>[0];

const labels: Labels = { os: 'windows', rack: 'r1', 'kubernetes.io/arch': 'amd64', zone: '', 'a_b-c.d': 'x y' };
const sel = (s: string, l: Labels = labels) => parseSelector(s)(l);

t.test('all() and the empty selector match every host', async (t) => {
  for (const s of ['all()', ' all( ) ', '', '   ', '\t\n']) {
    t.equal(sel(s), true, JSON.stringify(s));
    t.equal(sel(s, {}), true, `${JSON.stringify(s)} on no labels`);
  }
  t.equal(sel('!all()'), false);
});

t.test('== and !=, with both quote styles', async (t) => {
  t.equal(sel('os == "windows"'), true);
  t.equal(sel("os == 'windows'"), true);
  t.equal(sel('os=="windows"'), true);
  t.equal(sel('os == "linux"'), false);
  t.equal(sel('os == "Windows"'), false, 'values are case-sensitive');
  t.equal(sel('os != "linux"'), true);
  t.equal(sel("os != 'windows'"), false);
  t.equal(sel('kubernetes.io/arch == "amd64"'), true, 'keys may hold . / -');
  t.equal(sel('a_b-c.d == "x y"'), true, 'values may hold spaces');
  t.equal(sel('zone == ""'), true, 'an empty value is a value');
  t.equal(sel('zone != ""'), false);
  t.equal(sel(`q == "it's"`, { q: "it's" }), true, 'double quotes may hold a single quote');
  t.equal(sel(`q == 'say "hi"'`, { q: 'say "hi"' }), true, 'single quotes may hold a double quote');
  t.equal(sel('q == "a && b || (c)"', { q: 'a && b || (c)' }), true, 'operators inside quotes are text');
});

t.test('a missing key: == is false, != is true (as in Calico)', async (t) => {
  t.equal(sel('missing == "x"'), false);
  t.equal(sel('missing != "x"'), true);
  t.equal(sel('missing == ""'), false, 'absent is not the same as empty');
  t.equal(sel('missing != ""'), true);
  t.equal(sel('!(missing == "x")'), true);
  // Keys that name Object.prototype members are ordinary absent keys.
  for (const k of ['constructor', 'toString', '__proto__', 'hasOwnProperty']) {
    t.equal(sel(`has(${k})`, {}), false, `has(${k})`);
    t.equal(sel(`${k} == "x"`, {}), false, `${k} == "x"`);
    t.equal(sel(`${k} != "x"`, {}), true, `${k} != "x"`);
  }
});

t.test('has(k) and !', async (t) => {
  t.equal(sel('has(os)'), true);
  t.equal(sel('has(zone)'), true, 'a key with an empty value is present');
  t.equal(sel('has(gpu)'), false);
  t.equal(sel('!has(gpu)'), true);
  t.equal(sel('! has(os)'), false);
  t.equal(sel('!!has(os)'), true);
  t.equal(sel('!os == "windows"'), false, '! applies to the whole comparison');
  t.equal(sel('has ( os )'), true, 'spaces inside has()');
  // "has" and "all" are ordinary keys when not followed by "(".
  t.equal(sel('has == "1"', { has: '1' }), true);
  t.equal(sel('all != "1"', { all: '1' }), false);
  t.equal(sel('has(all)', { all: '' }), true);
});

t.test('&& binds tighter than ||; parentheses regroup', async (t) => {
  // true || (false && false) = true; (true || false) && false = false.
  t.equal(sel('has(os) || has(gpu) && has(ssd)'), true);
  t.equal(sel('(has(os) || has(gpu)) && has(ssd)'), false);
  // (false && x) || true = true; false && (x || true) = false.
  t.equal(sel('has(gpu) && has(os) || has(rack)'), true);
  t.equal(sel('has(gpu) && (has(os) || has(rack))'), false);
  t.equal(sel('!(has(gpu) || has(ssd)) && os == "windows"'), true);
  t.equal(sel('((((os == "windows"))))'), true);
  t.equal(sel('rack == "r1" && os != "linux" && has(zone)'), true);
  t.equal(sel('rack == "r2" || os == "linux" || has(ssd)'), false);
});

t.test('in, not in, contains, starts with, ends with, global() (Calico semantics)', async (t) => {
  t.equal(sel('os in {"linux", "windows"}'), true);
  t.equal(sel("os in {'linux'}"), false);
  t.equal(sel('os in {}'), false, 'empty set');
  t.equal(sel('os in {"windows",}'), true, 'a trailing comma is accepted, as in Calico');
  t.equal(sel('missing in {"x"}'), false, 'absent key: in is false');
  t.equal(sel('os not in {"linux"}'), true);
  t.equal(sel('os not   in {"windows", "linux"}'), false, 'whitespace between not and in');
  t.equal(sel('missing not in {"x"}'), true, 'absent key: not in is true');
  t.equal(sel('os contains "indo"'), true);
  t.equal(sel('os contains ""'), true);
  t.equal(sel('missing contains ""'), false, 'absent key: contains is false');
  t.equal(sel('os starts with "win"'), true);
  t.equal(sel('os starts with "dows"'), false);
  t.equal(sel('os ends with "dows"'), true);
  t.equal(sel('missing ends with ""'), false);
  t.equal(sel('global()'), true, 'nodes are not namespaced: global() holds');
  t.equal(sel('!global()'), false);
  t.equal(sel('route-reflector == "true"', { 'route-reflector': 'true' }), true);
  // The operator words are keys anywhere but right after a key.
  t.equal(sel('in == "1" && contains in {"2"} && has(starts)', { in: '1', contains: '2', starts: '' }), true);
  t.equal(sel('!has(in)', {}), true);
  t.equal(sel('os in{"windows"}&&rack=="r1"'), true, 'no spaces needed around braces');
});

// ---- errors --------------------------------------------------------------------------------------------------------

function errorOf(s: string): SelectorError {
  try {
    parseSelector(s);
  } catch (e) {
    if (e instanceof SelectorError) return e;
    throw new Error(`selector ${JSON.stringify(s)} threw ${String(e)} instead of a SelectorError`);
  }
  throw new Error(`selector ${JSON.stringify(s)} was accepted`);
}

t.test('bad input is a SelectorError that names the position', async (t) => {
  // [text, 1-based position of the offending character, or "end"]
  const cases: [string, number | 'end'][] = [
    ['k ==', 'end'],
    ['k = "v"', 3],
    ['has(', 'end'],
    ['"unterminated', 1],
    ['k == "v" extra', 10],
    ["k == 'v", 6],
    ['k == v', 6],
    ['k', 'end'],
    ['k "v"', 3],
    ['(k == "v"', 'end'],
    ['k == "v")', 9],
    ['k == "v" &&', 'end'],
    ['|| k == "v"', 1],
    ['k == "v" & j == "w"', 10],
    ['has()', 5],
    ['all(x)', 5],
    ['k == "v" k2 == "w"', 10],
    ['k @= "v"', 3],
    ['!', 'end'],
    ['k in "v"', 6],
    ['k in {"v"', 'end'],
    ['k in {v}', 7],
    ['k not "v"', 3],
    ['k starts "v"', 3],
    ['k inx "v"', 3],
    ['k contains v', 12],
    ['global(x)', 8],
    ['k == "v" # c', 10],
  ];
  for (const [s, at] of cases) {
    const e = errorOf(s);
    t.ok(e.message.includes(s), `${JSON.stringify(s)}: message quotes the selector: ${e.message}`);
    t.equal(e.message.includes('\n'), false, 'one line');
    if (at === 'end') t.match(e.message, /at the end|position \d+/, `${JSON.stringify(s)}: ${e.message}`);
    else t.match(e.message, new RegExp(`position ${at}\\b`), `${JSON.stringify(s)}: ${e.message}`);
  }
});

// ---- property: random expression trees ---------------------------------------------------------------------------

type Expr =
  | { k: 'all' | 'global' }
  | { k: 'eq' | 'ne' | 'contains' | 'startsWith' | 'endsWith'; key: string; val: string; q: '"' | "'" }
  | { k: 'in' | 'notIn'; key: string; vals: string[]; q: '"' | "'" }
  | { k: 'has'; key: string }
  | { k: 'not'; e: Expr }
  | { k: 'and' | 'or'; a: Expr; b: Expr };

// A few keys (so labels often hit) including ones that look like keywords, and values with awkward characters.
const keyArb = fc.constantFrom('a', 'b', 'rack', 'kubernetes.io/os', 'x_y-z.w', 'has', 'all', '0', 'in', 'contains', 'not', 'global');
const valArb = fc.constantFrom('', 'v', 'w', 'a b', '&&', '||', '(x)', '!=', "it's", 'say "hi"', 'V');

const exprArb: fc.Arbitrary<Expr> = fc.letrec<{ e: Expr }>((tie) => ({
  e: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom<Expr>({ k: 'all' }, { k: 'global' }),
    fc.record({ key: keyArb, val: valArb, op: fc.constantFrom('eq', 'ne', 'contains', 'startsWith', 'endsWith'), dq: fc.boolean() }).map(({ key, val, op, dq }): Expr => {
      // Pick a quote the value does not contain.
      const q = val.includes('"') ? "'" : val.includes("'") ? '"' : dq ? '"' : "'";
      return { k: op as 'eq', key, val, q };
    }),
    fc.record({ key: keyArb, vals: fc.array(fc.constantFrom('', 'v', 'w', 'a b', '&&', '{x}', ','), { maxLength: 3 }), not: fc.boolean(), dq: fc.boolean() })
      .map(({ key, vals, not, dq }): Expr => ({ k: not ? 'notIn' : 'in', key, vals, q: dq ? '"' : "'" })),
    keyArb.map((key): Expr => ({ k: 'has', key })),
    tie('e').map((e): Expr => ({ k: 'not', e })),
    fc.tuple(tie('e'), tie('e'), fc.boolean()).map(([a, b, and]): Expr => ({ k: and ? 'and' : 'or', a, b })),
  ),
})).e;

function evaluate(e: Expr, l: Labels): boolean {
  const has = (k: string) => Object.prototype.hasOwnProperty.call(l, k);
  switch (e.k) {
    case 'all':
    case 'global':
      return true;
    case 'contains':
      return has(e.key) && l[e.key].indexOf(e.val) >= 0;
    case 'startsWith':
      return has(e.key) && l[e.key].slice(0, e.val.length) === e.val;
    case 'endsWith':
      return has(e.key) && l[e.key].length >= e.val.length && l[e.key].slice(l[e.key].length - e.val.length) === e.val;
    case 'in':
      return has(e.key) && e.vals.some((v) => v === l[e.key]);
    case 'notIn':
      return !has(e.key) || e.vals.every((v) => v !== l[e.key]);
    case 'eq':
      return has(e.key) && l[e.key] === e.val;
    case 'ne':
      return !has(e.key) || l[e.key] !== e.val;
    case 'has':
      return has(e.key);
    case 'not':
      return !evaluate(e.e, l);
    case 'and':
      return evaluate(e.a, l) && evaluate(e.b, l);
    case 'or':
      return evaluate(e.a, l) || evaluate(e.b, l);
  }
}

const prec = (e: Expr): number => (e.k === 'or' ? 1 : e.k === 'and' ? 2 : 3);

/** Print with the fewest parentheses the precedence rules allow, plus extra ones and whitespace from `rnd`. */
function print(e: Expr, rnd: () => number): string {
  const ws = () => [' ', '', '  ', '\t', '\n', ''][Math.floor(rnd() * 6)];
  const wrap = (s: string, need: boolean) => (need || rnd() < 0.15 ? `(${ws()}${s}${ws()})` : s);
  switch (e.k) {
    case 'all':
    case 'global':
      return `${e.k}(${ws()})`;
    case 'eq':
    case 'ne':
      return `${e.key}${ws()}${e.k === 'eq' ? '==' : '!='}${ws()}${e.q}${e.val}${e.q}`;
    case 'contains':
    case 'startsWith':
    case 'endsWith': {
      // Word operators need a space on each side of the words; the value may follow directly.
      const word = e.k === 'contains' ? 'contains' : e.k === 'startsWith' ? `starts ${ws()} with` : `ends${ws() || ' '}with`;
      return `${e.key} ${word}${ws()}${e.q}${e.val}${e.q}`;
    }
    case 'in':
    case 'notIn': {
      const set = e.vals.map((v) => `${ws()}${e.q}${v}${e.q}${ws()}`).join(',');
      return `${e.key} ${e.k === 'in' ? 'in' : `not${ws() || ' '}in`}${ws()}{${set}}`;
    }
    case 'has':
      return `has(${ws()}${e.key}${ws()})`;
    case 'not':
      return `!${ws()}${wrap(print(e.e, rnd), prec(e.e) < 3)}`;
    case 'and':
    case 'or': {
      const p = prec(e);
      const op = e.k === 'and' ? '&&' : '||';
      return `${wrap(print(e.a, rnd), prec(e.a) < p)}${ws()}${op}${ws()}${wrap(print(e.b, rnd), prec(e.b) < p)}`;
    }
  }
}

const labelsArb: fc.Arbitrary<Labels> = fc.dictionary(keyArb, valArb, { maxKeys: 6 });

function holds(t: T, prop: fc.IProperty<any>, numRuns: number): void {
  const r = fc.check(prop, { numRuns });
  t.notOk(r.failed, r.failed ? `${String(r.errorInstance)}\n${fc.defaultReportMessage(r)}` : `property holds (${r.numRuns} runs)`);
}

t.test('random expression trees: parseSelector(print(tree)) agrees with evaluating the tree', async (t) => {
  holds(
    t,
    fc.property(exprArb, fc.array(labelsArb, { minLength: 1, maxLength: 8 }), fc.integer(), (e, ls, seed) => {
      // A small deterministic generator for whitespace and optional parentheses.
      let s = seed >>> 0 || 1;
      const rnd = () => ((s = Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) >>> 0 || 1), (s % 1000) / 1000);
      const text = print(e, rnd);
      const f = parseSelector(text);
      for (const l of ls) {
        if (f(l) !== evaluate(e, l)) throw new Error(`${text} on ${JSON.stringify(l)}: got ${f(l)}, want ${evaluate(e, l)}`);
      }
    }),
    3000,
  );
});

t.test('random junk: only SelectorError, never another exception', async (t) => {
  const chars = fc.constantFrom(...'ab=!&|()"\' has all in not{},contains'.split(''));
  holds(
    t,
    fc.property(fc.string({ unit: chars, maxLength: 20 }), (s) => {
      try {
        const f = parseSelector(s);
        if (typeof f({}) !== 'boolean') throw new Error(`${s}: not a boolean`);
      } catch (e) {
        if (!(e instanceof SelectorError)) throw e;
        if (!/position \d+|at the end/.test(e.message)) throw new Error(`no position in: ${e.message}`);
      }
    }),
    3000,
  );
});
