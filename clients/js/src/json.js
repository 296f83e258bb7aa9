// JSON that keeps numbers exact. JSON.parse reads every number into a double, so 12345678901234567890
// comes back as 12345678901234567000; this parser reads a number as a JS number only when that number
// writes back to the same decimal value (0.1 stays 0.1), an integer beyond 2^53 as a BigInt, and any
// other number (more digits than a double holds) as a JsonNumber keeping its text. stringify writes all
// three back exactly.

/** A number no JS number holds exactly, kept as its JSON text. */
export class JsonNumber {
  /** @param {string} text */
  constructor(text) {
    if (!NUMBER.test(text)) throw new TypeError(`not a JSON number: ${text}`);
    this.text = text;
  }
  toString() { return this.text; }
  valueOf() { return Number(this.text); }
  /** For JSON.stringify, which can only write a double. */
  toJSON() { return Number(this.text); }
}

const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/**
 * A number's exact decimal value as a canonical key ("-15e-1" for -1.50), so two texts compare by
 * value without a double: 1 equals 1.0 and 1E+0.
 * @param {string} text
 */
export function decimalKey(text) {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) throw new TypeError(`not a number: ${text}`);
  const frac = m[3] || '';
  let digits = (m[2] + frac).replace(/^0+/, '');
  let exp = BigInt(m[4] || 0) - BigInt(frac.length);
  if (digits === '') return '0';
  const trimmed = digits.replace(/0+$/, '');
  exp += BigInt(digits.length - trimmed.length);
  digits = trimmed;
  return `${m[1]}${digits}e${exp}`;
}

/** @param {string} text */
function readNumber(text) {
  if (/^-?\d+$/.test(text)) {
    const n = Number(text);
    return Number.isSafeInteger(n) ? n : BigInt(text);
  }
  const n = Number(text);
  if (Number.isFinite(n) && decimalKey(String(n)) === decimalKey(text)) return n;
  return new JsonNumber(text);
}

/**
 * Parse JSON text, numbers exact (see above).
 * @param {string} s
 * @returns {any}
 */
export function parse(s) {
  let i = 0;
  const fail = (what) => { throw new SyntaxError(`JSON: ${what} at ${i}`); };
  const ws = () => { while (i < s.length && (s[i] === ' ' || s[i] === '\n' || s[i] === '\r' || s[i] === '\t')) i++; };
  const value = (depth) => {
    if (depth > 512) fail('nesting too deep');
    ws();
    const c = s[i];
    if (c === '{') {
      i++;
      const o = {};
      ws();
      if (s[i] === '}') { i++; return o; }
      for (;;) {
        ws();
        if (s[i] !== '"') fail('expected a member name');
        const k = string();
        ws();
        if (s[i++] !== ':') fail("expected ':'");
        const v = value(depth + 1);
        // a member named __proto__ is a member, not the prototype
        if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
        else o[k] = v;
        ws();
        if (s[i] === ',') { i++; continue; }
        if (s[i] === '}') { i++; return o; }
        fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      i++;
      const a = [];
      ws();
      if (s[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value(depth + 1));
        ws();
        if (s[i] === ',') { i++; continue; }
        if (s[i] === ']') { i++; return a; }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    if (s.startsWith('true', i)) { i += 4; return true; }
    if (s.startsWith('false', i)) { i += 5; return false; }
    if (s.startsWith('null', i)) { i += 4; return null; }
    const m = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
    m.lastIndex = i;
    const found = m.exec(s);
    if (!found || found[0] === '' || found[0] === '-') fail('unexpected character');
    i += found[0].length;
    return readNumber(found[0]);
  };
  const string = () => {
    const start = i++;
    for (;;) {
      const c = s.charCodeAt(i);
      if (Number.isNaN(c)) fail('unterminated string');
      if (c === 0x22) break;
      if (c === 0x5c) i++;
      else if (c < 0x20) fail('control character in a string');
      i++;
    }
    i++;
    return JSON.parse(s.slice(start, i)); // the escapes, exactly as JSON defines them
  };
  const v = value(0);
  ws();
  if (i !== s.length) fail('text after the value');
  return v;
}

/**
 * Compact JSON text, numbers exact: a number as its shortest text, a BigInt as its digits, a
 * JsonNumber as its text. NaN and infinities have no JSON form (TypeError).
 * @param {any} v
 * @returns {string}
 */
export function stringify(v) {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean': return v ? 'true' : 'false';
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`${v} has no JSON form`);
      return String(v);
    case 'bigint': return v.toString();
    case 'string': return JSON.stringify(v);
    case 'object': {
      if (v instanceof JsonNumber) return v.text;
      if (Array.isArray(v)) {
        return '[' + v.map((x) => (x === undefined || typeof x === 'function' || typeof x === 'symbol' ? 'null' : stringify(x))).join(',') + ']';
      }
      if (typeof v.toJSON === 'function') return stringify(v.toJSON());
      const parts = [];
      for (const k of Object.keys(v)) {
        const x = v[k];
        if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
        parts.push(JSON.stringify(k) + ':' + stringify(x));
      }
      return '{' + parts.join(',') + '}';
    }
    default:
      throw new TypeError(`${typeof v} is not JSON`);
  }
}
