/**
 * A small, safe JSON Schema validator for tool arguments (§8.2).
 *
 * The subset: `type` (one or a list), `enum`, `const`, `properties`,
 * `required`, `additionalProperties`, `patternProperties`, `minProperties`,
 * `maxProperties`, `items` (one schema), `prefixItems`, `minItems`,
 * `maxItems`, `uniqueItems`, `minLength`, `maxLength` (in code points),
 * `pattern`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`
 * (numbers, and draft-04 booleans), `multipleOf`, `allOf`, `anyOf`,
 * `oneOf`, `not`, `if`/`then`/`else`, and `$ref` to a JSON pointer inside
 * the same schema (`#`, `#/$defs/...`, `#/definitions/...`). Annotations
 * (`title`, `description`, `format`, `default`, `examples`...) and unknown
 * keywords are ignored.
 *
 * Safety: no remote `$ref` is ever fetched (one is a {@link SchemaError});
 * nesting and `$ref` chains are bounded ({@link SCHEMA_LIMITS}); a `pattern`
 * runs only on strings up to `maxPatternInput` code units (a longer string
 * fails the check rather than risk a slow regular expression).
 * @module
 */
import { TokenwireError } from "./errors.js";
import type { JSONSchema } from "./events.js";

/**
 * The schema cannot be used: a remote `$ref`, a bad pattern, a limit passed.
 * `path` names the faulty value when known (`tools[0].parameters.properties.x.pattern`).
 */
export class SchemaError extends TokenwireError {
  readonly path: string | null;
  constructor(message: string, path: string | null = null) {
    super(path === null ? message : `${path}: ${message}`);
    this.path = path;
  }
}

/** The validator's bounds. */
export const SCHEMA_LIMITS = Object.freeze({
  /** Nested schema applications (value depth plus `$ref` hops). */
  maxDepth: 64,
  /** Total schema applications for one value. */
  maxSteps: 100_000,
  /** The longest string a `pattern` is run on. */
  maxPatternInput: 10_000,
});

/**
 * The request-time bounds of {@link checkSchema}, the Python core's
 * (`tokenwire.toolschema`): a `minItems`, `minLength`, `minProperties` or
 * `minContains` over `maxMinBound`, or a pattern longer than
 * `maxPatternLength`, makes a schema unusable.
 */
export const SCHEMA_BOUNDS = Object.freeze({
  maxMinBound: 4096,
  maxPatternLength: 1000,
});

/** The drafts a tool schema may name in `$schema` (without one: 2020-12), as in Python. */
export const SCHEMA_DRAFTS = Object.freeze([
  "https://json-schema.org/draft/2020-12/schema",
  "https://json-schema.org/draft/2019-09/schema",
  "http://json-schema.org/draft-07/schema",
  "http://json-schema.org/draft-06/schema",
  "http://json-schema.org/draft-04/schema",
] as const);

/** Why a value does not match: the JSON path of the offending value and one sentence. */
export interface SchemaViolation {
  path: string;
  message: string;
}

type Obj = { [key: string]: unknown };

const isObject = (v: unknown): v is Obj => v !== null && typeof v === "object" && !Array.isArray(v);

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

function typeMatches(want: unknown, value: unknown): boolean {
  const got = jsonType(value);
  if (want === "number") return got === "number" || got === "integer";
  return want === got;
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) {
    return Array.isArray(b) && a.length === b.length && a.every((x, i) => equal(x, b[i]));
  }
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    const kb = Object.keys(b);
    return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
  }
  return false;
}

function child(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key)
    ? `${path}.${key}`
    : `${path}[${JSON.stringify(key)}]`;
}

class Checker {
  private steps = 0;
  private readonly patterns = new Map<string, RegExp>();

  constructor(private readonly root: JSONSchema) {}

  check(schema: unknown, value: unknown, path: string, depth: number): SchemaViolation | null {
    if (++this.steps > SCHEMA_LIMITS.maxSteps) {
      throw new SchemaError(`schema check passed ${SCHEMA_LIMITS.maxSteps} steps`);
    }
    if (depth > SCHEMA_LIMITS.maxDepth) {
      throw new SchemaError(`schema nesting passed ${SCHEMA_LIMITS.maxDepth} levels`);
    }
    if (schema === true || schema === undefined) return null;
    if (schema === false) return { path, message: "no value is allowed here" };
    if (!isObject(schema)) throw new SchemaError(`${path}: a schema must be an object or boolean`);
    const fail = (message: string): SchemaViolation => ({ path, message });

    if (typeof schema.$ref === "string") {
      const target = this.resolve(schema.$ref);
      const problem = this.check(target, value, path, depth + 1);
      if (problem) return problem;
    }
    const type = schema.type;
    if (type !== undefined) {
      const types = Array.isArray(type) ? type : [type];
      if (!types.some((t) => typeMatches(t, value))) {
        return fail(`expected ${types.join(" or ")}, got ${jsonType(value)}`);
      }
    }
    if (Array.isArray(schema.enum) && !schema.enum.some((e) => equal(e, value))) {
      return fail(`not one of ${JSON.stringify(schema.enum)}`);
    }
    if ("const" in schema && !equal(schema.const, value)) {
      return fail(`not ${JSON.stringify(schema.const)}`);
    }
    const problem =
      (typeof value === "string" && this.string(schema, value, fail)) ||
      (typeof value === "number" && this.number(schema, value, fail)) ||
      (Array.isArray(value) && this.array(schema, value, path, depth)) ||
      (isObject(value) && this.object(schema, value, path, depth)) ||
      this.combinators(schema, value, path, depth);
    return problem || null;
  }

  private resolve(ref: string): unknown {
    // Only JSON pointers into this same schema: never a remote document.
    if (ref !== "#" && !ref.startsWith("#/")) {
      throw new SchemaError(`$ref ${JSON.stringify(ref)}: only local refs (#/...) are supported`);
    }
    let node: unknown = this.root;
    for (const raw of ref
      .slice(2)
      .split("/")
      .filter((p, i) => p !== "" || i > 0)) {
      const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
      if (Array.isArray(node) && /^[0-9]+$/.test(key)) node = node[Number(key)];
      else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
      else throw new SchemaError(`$ref ${JSON.stringify(ref)} points at nothing`);
    }
    return node;
  }

  private string(
    schema: Obj,
    value: string,
    fail: (m: string) => SchemaViolation,
  ): SchemaViolation | null {
    const length = [...value].length;
    if (typeof schema.minLength === "number" && length < schema.minLength) {
      return fail(`shorter than ${schema.minLength} characters`);
    }
    if (typeof schema.maxLength === "number" && length > schema.maxLength) {
      return fail(`longer than ${schema.maxLength} characters`);
    }
    if (typeof schema.pattern === "string") {
      if (value.length > SCHEMA_LIMITS.maxPatternInput) {
        return fail(`too long (${value.length}) to check against pattern ${schema.pattern}`);
      }
      if (!this.regex(schema.pattern).test(value)) {
        return fail(`does not match pattern ${JSON.stringify(schema.pattern)}`);
      }
    }
    return null;
  }

  private regex(pattern: string): RegExp {
    let re = this.patterns.get(pattern);
    if (re === undefined) {
      try {
        re = new RegExp(pattern, "u");
      } catch (exc) {
        throw new SchemaError(`pattern ${JSON.stringify(pattern)}: ${(exc as Error).message}`);
      }
      this.patterns.set(pattern, re);
    }
    return re;
  }

  private number(
    schema: Obj,
    value: number,
    fail: (m: string) => SchemaViolation,
  ): SchemaViolation | null {
    const { minimum, maximum, exclusiveMinimum: exMin, exclusiveMaximum: exMax } = schema;
    if (typeof minimum === "number") {
      if (exMin === true ? value <= minimum : value < minimum) {
        return fail(`less than ${exMin === true ? "or equal to " : ""}${minimum}`);
      }
    }
    if (typeof maximum === "number") {
      if (exMax === true ? value >= maximum : value > maximum) {
        return fail(`greater than ${exMax === true ? "or equal to " : ""}${maximum}`);
      }
    }
    if (typeof exMin === "number" && value <= exMin) return fail(`not greater than ${exMin}`);
    if (typeof exMax === "number" && value >= exMax) return fail(`not less than ${exMax}`);
    const step = schema.multipleOf;
    if (typeof step === "number" && step > 0) {
      const q = value / step;
      if (Math.abs(q - Math.round(q)) > 1e-9) return fail(`not a multiple of ${step}`);
    }
    return null;
  }

  private array(
    schema: Obj,
    value: unknown[],
    path: string,
    depth: number,
  ): SchemaViolation | null {
    const fail = (message: string): SchemaViolation => ({ path, message });
    if (typeof schema.minItems === "number" && value.length < schema.minItems) {
      return fail(`fewer than ${schema.minItems} items`);
    }
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) {
      return fail(`more than ${schema.maxItems} items`);
    }
    if (schema.uniqueItems === true) {
      for (let i = 0; i < value.length; i++) {
        for (let j = i + 1; j < value.length; j++) {
          if (equal(value[i], value[j])) return fail(`items ${i} and ${j} are equal`);
        }
      }
    }
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
    for (let i = 0; i < value.length; i++) {
      const sub = i < prefix.length ? prefix[i] : schema.items;
      if (sub === undefined || Array.isArray(sub)) continue;
      const problem = this.check(sub, value[i], child(path, i), depth + 1);
      if (problem) return problem;
    }
    return null;
  }

  private object(schema: Obj, value: Obj, path: string, depth: number): SchemaViolation | null {
    const keys = Object.keys(value);
    if (typeof schema.minProperties === "number" && keys.length < schema.minProperties) {
      return { path, message: `fewer than ${schema.minProperties} properties` };
    }
    if (typeof schema.maxProperties === "number" && keys.length > schema.maxProperties) {
      return { path, message: `more than ${schema.maxProperties} properties` };
    }
    if (Array.isArray(schema.required)) {
      for (const name of schema.required) {
        if (typeof name === "string" && !Object.hasOwn(value, name)) {
          return { path, message: `the required property ${JSON.stringify(name)} is missing` };
        }
      }
    }
    const properties = isObject(schema.properties) ? schema.properties : {};
    const patterns = isObject(schema.patternProperties) ? schema.patternProperties : {};
    for (const key of keys) {
      let matched = false;
      if (Object.hasOwn(properties, key)) {
        matched = true;
        const problem = this.check(properties[key], value[key], child(path, key), depth + 1);
        if (problem) return problem;
      }
      for (const [pattern, sub] of Object.entries(patterns)) {
        if (key.length <= SCHEMA_LIMITS.maxPatternInput && this.regex(pattern).test(key)) {
          matched = true;
          const problem = this.check(sub, value[key], child(path, key), depth + 1);
          if (problem) return problem;
        }
      }
      if (!matched && schema.additionalProperties !== undefined) {
        if (schema.additionalProperties === false) {
          return { path, message: `the property ${JSON.stringify(key)} is not allowed` };
        }
        const problem = this.check(
          schema.additionalProperties,
          value[key],
          child(path, key),
          depth + 1,
        );
        if (problem) return problem;
      }
    }
    return null;
  }

  private combinators(
    schema: Obj,
    value: unknown,
    path: string,
    depth: number,
  ): SchemaViolation | null {
    const fail = (message: string): SchemaViolation => ({ path, message });
    if (Array.isArray(schema.allOf)) {
      for (const sub of schema.allOf) {
        const problem = this.check(sub, value, path, depth + 1);
        if (problem) return problem;
      }
    }
    if (Array.isArray(schema.anyOf)) {
      if (!schema.anyOf.some((sub) => this.check(sub, value, path, depth + 1) === null)) {
        return fail("matches none of anyOf");
      }
    }
    if (Array.isArray(schema.oneOf)) {
      const n = schema.oneOf.filter((sub) => this.check(sub, value, path, depth + 1) === null);
      if (n.length !== 1) return fail(`matches ${n.length} of oneOf, not exactly one`);
    }
    if ("not" in schema && this.check(schema.not, value, path, depth + 1) === null) {
      return fail("matches the schema of not");
    }
    if ("if" in schema) {
      const branch = this.check(schema.if, value, path, depth + 1) === null ? "then" : "else";
      if (branch in schema) {
        const problem = this.check(schema[branch], value, path, depth + 1);
        if (problem) return problem;
      }
    }
    return null;
  }
}

/**
 * Check `value` against `schema` (the subset above).
 * @returns null when it matches, else the first violation found (path in `$.a[0]` style).
 * @throws {@link SchemaError} when the schema cannot be used (remote `$ref`, a
 *   pattern that is not a valid regular expression, a limit passed).
 */
export function validateSchema(schema: JSONSchema, value: unknown): SchemaViolation | null {
  return new Checker(schema).check(schema, value, "$", 0);
}

// --- checkSchema: the request-time walk (Python's toolschema.check_schema) --------------

const REF_KEYWORDS = ["$ref", "$dynamicRef", "$recursiveRef"];
const MIN_KEYWORDS = ["minItems", "minLength", "minProperties", "minContains"];
// Keywords whose value is one subschema, an array of them, or an object of them.
const ONE = [
  "additionalItems",
  "additionalProperties",
  "contains",
  "contentSchema",
  "else",
  "if",
  "items",
  "not",
  "propertyNames",
  "then",
  "unevaluatedItems",
  "unevaluatedProperties",
];
const MANY = ["allOf", "anyOf", "oneOf", "prefixItems", "items"];
const NAMED = [
  "$defs",
  "definitions",
  "dependencies",
  "dependentSchemas",
  "patternProperties",
  "properties",
];
// What RE2 (the Python core's pattern engine) refuses: backreferences and lookarounds.
const NOT_LINEAR = /\\[1-9]|\\k<|\(\?<?[=!]/;

// A path step as Python's toolschema names it: `.key` for identifier-like keys ($ too).
function at(path: string, key: string | number): string {
  if (typeof key === "number") return `${path}[${key}]`;
  if (/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)) return `${path}.${key}`;
  return `${path}[${JSON.stringify(key.length <= 64 ? key : `${key.slice(0, 64)}…`)}]`;
}

function shown(value: unknown): string {
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return JSON.stringify(text.length <= 64 ? text : `${text.slice(0, 64)}…`);
}

function checkPattern(pattern: string, path: string): void {
  if (pattern.length > SCHEMA_BOUNDS.maxPatternLength) {
    throw new SchemaError(
      `unusable pattern: longer than ${SCHEMA_BOUNDS.maxPatternLength} characters`,
      path,
    );
  }
  if (NOT_LINEAR.test(pattern)) {
    throw new SchemaError(
      "unusable pattern: not a pattern tokenwire can match in linear time " +
        "(no backreferences or lookarounds)",
      path,
    );
  }
  try {
    new RegExp(pattern, "u");
  } catch (exc) {
    throw new SchemaError(`unusable pattern: ${(exc as Error).message}`, path);
  }
}

function walk(node: unknown, path: string, depth: number): void {
  if (depth > SCHEMA_LIMITS.maxDepth) {
    throw new SchemaError(`nested more than ${SCHEMA_LIMITS.maxDepth} levels`, path);
  }
  if (!isObject(node)) return; // true / false are schemas; other values are not walked
  if ("$schema" in node) {
    const uri = node.$schema;
    if (
      typeof uri !== "string" ||
      !(SCHEMA_DRAFTS as readonly string[]).includes(uri.replace(/#+$/, ""))
    ) {
      throw new SchemaError(
        `unsupported $schema ${shown(uri)}: use draft 2020-12, 2019-09, 7, 6 or 4`,
        at(path, "$schema"),
      );
    }
  }
  for (const keyword of REF_KEYWORDS) {
    const ref = node[keyword];
    if (ref !== undefined && ref !== null && !(typeof ref === "string" && ref.startsWith("#"))) {
      // Never resolved against the network or the file system (§8 security).
      throw new SchemaError(
        `only local references (#...) are allowed, got ${shown(ref)}`,
        at(path, keyword),
      );
    }
  }
  for (const keyword of MIN_KEYWORDS) {
    const bound = node[keyword];
    if (typeof bound === "number" && bound > SCHEMA_BOUNDS.maxMinBound) {
      throw new SchemaError(
        `${keyword} is over tokenwire's limit of ${SCHEMA_BOUNDS.maxMinBound}`,
        at(path, keyword),
      );
    }
  }
  if (typeof node.pattern === "string") checkPattern(node.pattern, at(path, "pattern"));
  for (const keyword of ONE) {
    const sub = node[keyword];
    if (isObject(sub) || typeof sub === "boolean") walk(sub, at(path, keyword), depth + 1);
  }
  for (const keyword of MANY) {
    const subs = node[keyword];
    if (Array.isArray(subs)) {
      subs.forEach((sub, i) => walk(sub, at(at(path, keyword), i), depth + 1));
    }
  }
  for (const keyword of NAMED) {
    const subs = node[keyword];
    if (!isObject(subs)) continue;
    const where = at(path, keyword);
    for (const [name, sub] of Object.entries(subs)) {
      if (keyword === "patternProperties") checkPattern(name, at(where, name));
      walk(sub, at(where, name), depth + 1);
    }
  }
}

/**
 * Check a tool's `parameters` schema before it is used (§4.4, §8.2), as the
 * Python core does when it parses a request (`toolschema.check_schema`).
 * @param schema  The schema.
 * @param path  Where it sits in the request, for the error (`tools[0].parameters`).
 * @throws {@link SchemaError} naming the faulty value's path when the schema
 *   is not an object, names an unsupported `$schema`, holds a non-local
 *   reference, a pattern that is not a valid regular expression or uses a
 *   backreference or lookaround (the Python core matches patterns in linear
 *   time, with RE2, and refuses those), or a `min*` bound over
 *   `SCHEMA_BOUNDS.maxMinBound`. It does not check the schema against its
 *   draft's metaschema, as Python does.
 */
export function checkSchema(schema: unknown, path = "$"): void {
  if (!isObject(schema)) throw new SchemaError("must be a JSON Schema object (§4.4)", path);
  walk(schema, path, 0);
}
