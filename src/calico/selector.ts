// Calico's label selector grammar, one parser for pools (nodeSelector) and BGP peers (nodeSelector, peerSelector).
//   all() | global() | has(k) | k == "v" | k != "v" | k in {"a", "b"} | k not in {...}
//   | k contains "s" | k starts with "s" | k ends with "s" | !expr | a && b | a || b | ( expr )
// `&&` binds tighter than `||`; `!` applies to the term that follows. Values are quoted with " or '. A missing key
// makes ==, in, contains, starts with, ends with false and !=, not in true (libcalico-go's semantics). The words
// in/not in/contains/starts with/ends with are operators only right after a key, so they remain usable as keys.
// global() matches every node: nodes have no namespace, which is all global() tests for. An empty selector is all().

export type Labels = Record<string, string>;
export type Selector = (labels: Labels) => boolean;

export class SelectorError extends Error {
  override name = 'SelectorError';
}

/** The parsed tree, exported so callers (and tests) can inspect what a selector says. */
export type SelectorAst =
  | { k: 'all' | 'global' }
  | { k: 'has'; key: string }
  | { k: 'eq' | 'ne' | 'contains' | 'startsWith' | 'endsWith'; key: string; val: string }
  | { k: 'in' | 'notIn'; key: string; vals: string[] }
  | { k: 'not'; e: SelectorAst }
  | { k: 'and' | 'or'; a: SelectorAst; b: SelectorAst };

type Tok = { t: 'id' | 'str' | 'op'; v: string; at: number };

const KEY = /[A-Za-z0-9_./-]/;
const WS = /[ \t\n\r]/;
// Operators that are words; recognised only directly after a key. Longest first.
const WORD_OPS: [string, string[]][] = [
  ['not in', ['not', 'in']],
  ['starts with', ['starts', 'with']],
  ['ends with', ['ends', 'with']],
  ['contains', ['contains']],
  ['in', ['in']],
];

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  const err = (msg: string, at: number): never => {
    throw new SelectorError(`selector "${src}": ${msg} at position ${at + 1}`);
  };
  /** The end of `words` (separated by whitespace) at i, if they are there as whole words. */
  const wordsAt = (i: number, words: string[]): number => {
    let j = i;
    for (let w = 0; w < words.length; w++) {
      if (w > 0) {
        if (!WS.test(src[j] ?? '')) return -1;
        while (WS.test(src[j] ?? '')) j++;
      }
      if (!src.startsWith(words[w], j)) return -1;
      j += words[w].length;
    }
    return KEY.test(src[j] ?? '') ? -1 : j;
  };
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    const prev = out[out.length - 1];
    if (WS.test(c)) {
      i++;
    } else if (c === '"' || c === "'") {
      const end = src.indexOf(c, i + 1);
      if (end < 0) err('unterminated string', i);
      out.push({ t: 'str', v: src.slice(i + 1, end), at: i });
      i = end + 1;
    } else if (src.startsWith('==', i) || src.startsWith('!=', i) || src.startsWith('&&', i) || src.startsWith('||', i)) {
      out.push({ t: 'op', v: src.slice(i, i + 2), at: i });
      i += 2;
    } else if ('()!{},'.includes(c)) {
      out.push({ t: 'op', v: c, at: i });
      i++;
    } else if (KEY.test(c)) {
      let op: string | undefined;
      let end = -1;
      if (prev?.t === 'id') {
        for (const [name, words] of WORD_OPS) {
          end = wordsAt(i, words);
          if (end >= 0) {
            op = name;
            break;
          }
        }
      }
      if (op !== undefined) {
        out.push({ t: 'op', v: op, at: i });
        i = end;
      } else {
        let j = i;
        while (j < src.length && KEY.test(src[j])) j++;
        if (j - i > 512) err('label longer than 512 characters', i);
        out.push({ t: 'id', v: src.slice(i, j), at: i });
        i = j;
      }
    } else {
      err(`unexpected "${c}"`, i);
    }
  }
  return out;
}

/** Parse a selector into its tree. Errors are SelectorErrors naming the 1-based position (or "at the end"). */
export function parseSelectorAst(src: string): SelectorAst {
  const text = (src ?? '').trim();
  if (text === '') return { k: 'all' };
  const toks = tokenize(text);
  let pos = 0;
  const peek = (o = 0): Tok | undefined => toks[pos + o];
  const isOp = (tok: Tok | undefined, v: string) => tok?.t === 'op' && tok.v === v;
  const fail = (what: string): never => {
    const tok = toks[pos];
    throw new SelectorError(
      `selector "${text}": expected ${what} ${tok ? `at position ${tok.at + 1}, found "${tok.v}"` : 'at the end'}`,
    );
  };
  const expectOp = (v: string): void => {
    if (!isOp(peek(), v)) fail(`"${v}"`);
    pos++;
  };
  const str = (): string => {
    const val = peek();
    if (val?.t !== 'str') return fail('a quoted value');
    pos++;
    return val.v;
  };

  const parseOr = (): SelectorAst => {
    let a = parseAnd();
    while (isOp(peek(), '||')) {
      pos++;
      a = { k: 'or', a, b: parseAnd() };
    }
    return a;
  };
  const parseAnd = (): SelectorAst => {
    let a = parseUnary();
    while (isOp(peek(), '&&')) {
      pos++;
      a = { k: 'and', a, b: parseUnary() };
    }
    return a;
  };
  const parseUnary = (): SelectorAst => {
    const tok = peek();
    if (isOp(tok, '!')) {
      pos++;
      return { k: 'not', e: parseUnary() };
    }
    if (isOp(tok, '(')) {
      pos++;
      const inner = parseOr();
      expectOp(')');
      return inner;
    }
    if (tok?.t === 'id' && (tok.v === 'all' || tok.v === 'global' || tok.v === 'has') && isOp(peek(1), '(')) {
      pos += 2;
      if (tok.v !== 'has') {
        expectOp(')');
        return { k: tok.v as 'all' | 'global' };
      }
      const key = peek();
      if (key?.t !== 'id') return fail('a label key inside has()');
      pos++;
      expectOp(')');
      return { k: 'has', key: key.v };
    }
    if (tok?.t === 'id') {
      pos++;
      const key = tok.v;
      const op = peek();
      if (op?.t === 'op') {
        pos++;
        switch (op.v) {
          case '==':
            return { k: 'eq', key, val: str() };
          case '!=':
            return { k: 'ne', key, val: str() };
          case 'contains':
            return { k: 'contains', key, val: str() };
          case 'starts with':
            return { k: 'startsWith', key, val: str() };
          case 'ends with':
            return { k: 'endsWith', key, val: str() };
          case 'in':
          case 'not in': {
            expectOp('{');
            const vals: string[] = [];
            while (peek()?.t === 'str') {
              vals.push(str());
              if (!isOp(peek(), ',')) break;
              pos++;
            }
            if (!isOp(peek(), '}')) fail('a quoted value, "," or "}"');
            pos++;
            return { k: op.v === 'in' ? 'in' : 'notIn', key, vals };
          }
        }
        pos--;
      }
      return fail(`an operator (==, !=, in, not in, contains, starts with, ends with) after "${key}"`);
    }
    return fail('a term (all(), global(), has(k), k == "v", k in {...}, !, or "(")');
  };

  const ast = parseOr();
  if (pos < toks.length) fail('"&&", "||" or the end');
  return ast;
}

/** Evaluate a tree against labels (own properties only: "constructor" is an absent key like any other). */
export function evaluateSelector(e: SelectorAst, l: Labels): boolean {
  const get = (k: string): string | undefined => (Object.prototype.hasOwnProperty.call(l, k) ? l[k] : undefined);
  switch (e.k) {
    case 'all':
    case 'global':
      return true;
    case 'has':
      return get(e.key) !== undefined;
    case 'eq':
      return get(e.key) === e.val;
    case 'ne':
      return get(e.key) !== e.val;
    case 'contains':
      return get(e.key)?.includes(e.val) ?? false;
    case 'startsWith':
      return get(e.key)?.startsWith(e.val) ?? false;
    case 'endsWith':
      return get(e.key)?.endsWith(e.val) ?? false;
    case 'in': {
      const v = get(e.key);
      return v !== undefined && e.vals.includes(v);
    }
    case 'notIn': {
      const v = get(e.key);
      return v === undefined || !e.vals.includes(v);
    }
    case 'not':
      return !evaluateSelector(e.e, l);
    case 'and':
      return evaluateSelector(e.a, l) && evaluateSelector(e.b, l);
    case 'or':
      return evaluateSelector(e.a, l) || evaluateSelector(e.b, l);
  }
}

/** Parse a selector into a predicate over labels. Errors name the position. */
export function parseSelector(src: string): Selector {
  const ast = parseSelectorAst(src);
  return (labels) => evaluateSelector(ast, labels);
}
