// Node selectors: the subset of Calico's selector syntax that pools use to pick hosts.
//   all()  |  k == "v"  |  k != "v"  |  has(k)  |  !expr  |  a && b  |  a || b  |  ( expr )
// `&&` binds tighter than `||`. Values are quoted with " or '. An empty selector means all().

export type Labels = Record<string, string>;
export type Selector = (labels: Labels) => boolean;

export class SelectorError extends Error {
  override name = 'SelectorError';
}

type Tok = { t: 'id' | 'str' | 'op'; v: string; at: number };

const KEY = /[A-Za-z0-9_./-]/;

function tokenize(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i];
    if (c === ' ' || c === '\t' || c === '\n') {
      i++;
    } else if (c === '"' || c === "'") {
      const end = src.indexOf(c, i + 1);
      if (end < 0) throw new SelectorError(`selector "${src}": unterminated string at position ${i + 1}`);
      out.push({ t: 'str', v: src.slice(i + 1, end), at: i });
      i = end + 1;
    } else if (src.startsWith('==', i) || src.startsWith('!=', i) || src.startsWith('&&', i) || src.startsWith('||', i)) {
      out.push({ t: 'op', v: src.slice(i, i + 2), at: i });
      i += 2;
    } else if (c === '(' || c === ')' || c === '!') {
      out.push({ t: 'op', v: c, at: i });
      i++;
    } else if (KEY.test(c)) {
      let j = i;
      while (j < src.length && KEY.test(src[j])) j++;
      out.push({ t: 'id', v: src.slice(i, j), at: i });
      i = j;
    } else {
      throw new SelectorError(`selector "${src}": unexpected "${c}" at position ${i + 1}`);
    }
  }
  return out;
}

/** Parse a selector into a predicate over labels. Errors name the position. */
export function parseSelector(src: string): Selector {
  const text = (src ?? '').trim();
  if (text === '') return () => true;
  const toks = tokenize(text);
  let pos = 0;
  const peek = (): Tok | undefined => toks[pos];
  const fail = (what: string): never => {
    const tok = toks[pos];
    throw new SelectorError(
      `selector "${text}": expected ${what} ${tok ? `at position ${tok.at + 1}, found "${tok.v}"` : 'at the end'}`,
    );
  };
  const expectOp = (v: string): void => {
    const tok = peek();
    if (!tok || tok.t !== 'op' || tok.v !== v) fail(`"${v}"`);
    pos++;
  };

  const parseOr = (): Selector => {
    let left = parseAnd();
    while (peek()?.t === 'op' && peek()?.v === '||') {
      pos++;
      const a = left;
      const b = parseAnd();
      left = (l) => a(l) || b(l);
    }
    return left;
  };
  const parseAnd = (): Selector => {
    let left = parseUnary();
    while (peek()?.t === 'op' && peek()?.v === '&&') {
      pos++;
      const a = left;
      const b = parseUnary();
      left = (l) => a(l) && b(l);
    }
    return left;
  };
  const parseUnary = (): Selector => {
    const tok = peek();
    if (tok?.t === 'op' && tok.v === '!') {
      pos++;
      const inner = parseUnary();
      return (l) => !inner(l);
    }
    if (tok?.t === 'op' && tok.v === '(') {
      pos++;
      const inner = parseOr();
      expectOp(')');
      return inner;
    }
    if (tok?.t === 'id' && (tok.v === 'all' || tok.v === 'has') && toks[pos + 1]?.v === '(') {
      pos += 2;
      if (tok.v === 'all') {
        expectOp(')');
        return () => true;
      }
      const key = peek();
      if (!key || key.t !== 'id') return fail('a label key inside has()');
      pos++;
      expectOp(')');
      return (l) => Object.prototype.hasOwnProperty.call(l, key.v);
    }
    if (tok?.t === 'id') {
      pos++;
      const op = peek();
      if (!op || op.t !== 'op' || (op.v !== '==' && op.v !== '!=')) return fail(`"==" or "!=" after "${tok.v}"`);
      pos++;
      const val = peek();
      if (!val || val.t !== 'str') return fail('a quoted value');
      pos++;
      const key = tok.v;
      const want = val.v;
      return op.v === '=='
        ? (l) => Object.prototype.hasOwnProperty.call(l, key) && l[key] === want
        : (l) => !Object.prototype.hasOwnProperty.call(l, key) || l[key] !== want;
    }
    return fail('a term (all(), has(k), k == "v", k != "v", !, or "(")');
  };

  const sel = parseOr();
  if (pos < toks.length) fail('"&&", "||" or the end');
  return sel;
}
