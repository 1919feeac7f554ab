// Lossless JSON for Calico's records. Calico (Go) writes 19-digit uint64 sequence numbers that a JS number would
// round, and a newer Calico may add fields we do not know; both must survive a read-modify-write untouched. So
// numbers stay as their literal text (JsonNumber) and objects are Maps that keep their key order.
//
// The serializer writes what Go's encoding/json writes for the same value: no spaces, and strings escaped the Go
// way (<, >, & and U+2028/U+2029 as \u escapes, control characters as \n, \r, \t, \b, \f (Go 1.22+) or \u00XX).

export class JsonNumber {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;
export type JsonObject = Map<string, JsonValue>;

export class JsonSyntaxError extends Error {
  override name = 'JsonSyntaxError';
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const WS = /[ \t\n\r]*/y;

/** Parse JSON text; numbers come back as JsonNumber with their exact literal, objects as ordered Maps. */
export function parseJson(text: string): JsonValue {
  let i = 0;
  const fail = (what: string): never => {
    throw new JsonSyntaxError(`${what} at offset ${i}`);
  };
  const ws = (): void => {
    WS.lastIndex = i;
    WS.exec(text);
    i = WS.lastIndex;
  };
  const str = (): string => {
    // i is at the opening quote
    let out = '';
    let start = ++i;
    for (;;) {
      if (i >= text.length) fail('unterminated string');
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        out += text.slice(start, i++);
        return out;
      }
      if (c < 0x20) fail('control character in string');
      if (c !== 0x5c) {
        i++;
        continue;
      }
      out += text.slice(start, i);
      const e = text[i + 1];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const hex = text.slice(i + 2, i + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail('bad \\u escape');
          out += String.fromCharCode(parseInt(hex, 16));
          i += 4;
          break;
        }
        default:
          fail('bad escape');
      }
      i += 2;
      start = i;
    }
  };
  const value = (depth: number): JsonValue => {
    if (depth > 64) fail('nesting too deep');
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const obj: JsonObject = new Map();
      ws();
      if (text[i] === '}') {
        i++;
        return obj;
      }
      for (;;) {
        ws();
        if (text[i] !== '"') fail('expected a key');
        const k = str();
        ws();
        if (text[i++] !== ':') fail('expected ":"');
        if (obj.has(k)) fail(`duplicate key ${JSON.stringify(k)}`);
        obj.set(k, value(depth + 1));
        ws();
        const d = text[i++];
        if (d === '}') return obj;
        if (d !== ',') fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      i++;
      const arr: JsonValue[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return arr;
      }
      for (;;) {
        arr.push(value(depth + 1));
        ws();
        const d = text[i++];
        if (d === ']') return arr;
        if (d !== ',') fail('expected "," or "]"');
      }
    }
    if (c === '"') return str();
    if (text.startsWith('true', i)) return (i += 4), true;
    if (text.startsWith('false', i)) return (i += 5), false;
    if (text.startsWith('null', i)) return (i += 4), null;
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(text);
    if (!m) return fail('unexpected character');
    i = NUMBER.lastIndex;
    return new JsonNumber(m[0]);
  };
  const v = value(0);
  ws();
  if (i !== text.length) fail('trailing characters');
  return v;
}

const ESC: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f', '<': '\\u003c', '>': '\\u003e', '&': '\\u0026', '\u2028': '\\u2028', '\u2029': '\\u2029' };

/** A string as Go's json.Marshal writes it. */
export function goString(s: string): string {
  // eslint-disable-next-line no-control-regex
  return `"${s.replace(/["\\<>&\u0000-\u001f\u2028\u2029]/g, (ch) => ESC[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

/** Serialize without spaces, numbers as their literal, object keys in Map order. */
export function stringifyJson(v: JsonValue): string {
  if (v === null) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (typeof v === 'string') return goString(v);
  if (v instanceof JsonNumber) return v.text;
  if (Array.isArray(v)) return `[${v.map(stringifyJson).join(',')}]`;
  const parts: string[] = [];
  for (const [k, x] of v) parts.push(`${goString(k)}:${stringifyJson(x)}`);
  return `{${parts.join(',')}}`;
}

/** Keys in the order Go writes a map[string]T: sorted by bytes (UTF-16 order is the same for the BMP we see). */
export function goMapOrder<T>(entries: Iterable<[string, T]>): [string, T][] {
  return [...entries].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}
