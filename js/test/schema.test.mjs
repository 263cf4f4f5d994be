// The JSON Schema subset the §8.2 tool-call checks use, and its safety bounds.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MODULE } from "./helpers.mjs";

const {
  validateSchema,
  checkSchema,
  schemaProblem,
  SchemaError,
  SCHEMA_LIMITS,
  SCHEMA_BOUNDS,
  Client,
  prepareRequest,
  validate,
} = await import(MODULE);

const ok = (schema, value) =>
  assert.equal(validateSchema(schema, value), null, JSON.stringify(value));
const bad = (schema, value, path, pattern) => {
  const problem = validateSchema(schema, value);
  assert.ok(problem, `${JSON.stringify(value)} should fail`);
  assert.equal(problem.path, path);
  if (pattern) assert.match(problem.message, pattern);
};

describe("keywords", () => {
  test("type, including integer vs number and type lists", () => {
    ok({ type: "integer" }, 3);
    bad({ type: "integer" }, 3.5, "$", /expected integer, got number/);
    ok({ type: "number" }, 3);
    ok({ type: ["string", "null"] }, null);
    bad({ type: ["string", "null"] }, 1, "$");
    bad({ type: "object" }, [], "$");
  });

  test("objects: required, properties, additionalProperties, patternProperties", () => {
    const schema = {
      type: "object",
      properties: { city: { type: "string" }, n: { type: "integer", minimum: 1 } },
      required: ["city"],
      patternProperties: { "^x-": { type: "boolean" } },
      additionalProperties: false,
    };
    ok(schema, { city: "Vienna", n: 2, "x-debug": true });
    bad(schema, {}, "$", /"city" is missing/);
    bad(schema, { city: 1 }, "$.city");
    bad(schema, { city: "a", n: 0 }, "$.n", /less than 1/);
    bad(schema, { city: "a", "x-debug": 1 }, '$["x-debug"]');
    bad(schema, { city: "a", other: 1 }, "$", /"other" is not allowed/);
    bad({ additionalProperties: { type: "string" } }, { a: 1 }, "$.a");
  });

  test("arrays: items, prefixItems, min/maxItems, uniqueItems", () => {
    ok({ type: "array", items: { type: "string" } }, ["a", "b"]);
    bad({ items: { type: "string" } }, ["a", 2], "$[1]");
    bad({ prefixItems: [{ type: "integer" }], items: { type: "string" } }, [1, 2], "$[1]");
    bad({ minItems: 2 }, [1], "$");
    bad({ maxItems: 1 }, [1, 2], "$");
    bad({ uniqueItems: true }, [{ a: 1 }, { a: 1 }], "$", /equal/);
  });

  test("strings (code points), numbers, enum, const", () => {
    ok({ maxLength: 1 }, "😀");
    bad({ minLength: 2 }, "😀", "$");
    ok({ pattern: "^[a-z]+$" }, "abc");
    bad({ pattern: "^[a-z]+$" }, "ab1", "$", /pattern/);
    bad({ exclusiveMaximum: 5 }, 5, "$");
    bad({ maximum: 5, exclusiveMaximum: true }, 5, "$"); // draft-04 form
    bad({ multipleOf: 0.5 }, 0.7, "$");
    ok({ multipleOf: 0.1 }, 0.3);
    ok({ enum: ["celsius", "fahrenheit"] }, "celsius");
    bad({ enum: ["celsius", "fahrenheit"] }, "kelvin", "$");
    bad({ const: { a: [1] } }, { a: [2] }, "$");
  });

  test("combinators and local $ref", () => {
    ok({ anyOf: [{ type: "string" }, { type: "integer" }] }, 3);
    bad({ anyOf: [{ type: "string" }, { type: "integer" }] }, 3.5, "$");
    bad({ oneOf: [{ type: "number" }, { type: "integer" }] }, 3, "$", /2 of oneOf/);
    bad({ allOf: [{ minimum: 1 }, { maximum: 2 }] }, 3, "$");
    bad({ not: { type: "null" } }, null, "$");
    const cond = { if: { properties: { kind: { const: "a" } } }, then: { required: ["a"] } };
    bad(cond, { kind: "a" }, "$");
    ok(cond, { kind: "b" });
    const tree = {
      $defs: {
        node: {
          type: "object",
          properties: { kids: { type: "array", items: { $ref: "#/$defs/node" } } },
        },
      },
      $ref: "#/$defs/node",
    };
    ok(tree, { kids: [{ kids: [] }] });
    bad(tree, { kids: [{ kids: [1] }] }, "$.kids[0].kids[0]");
    ok(true, 1);
    bad(false, 1, "$");
    ok({ title: "t", description: "d", format: "email", "x-unknown": 1 }, "not an email");
  });
});

describe("safety", () => {
  test("a remote $ref is never fetched: SchemaError", () => {
    assert.throws(() => validateSchema({ $ref: "https://example.com/s.json" }, 1), SchemaError);
    assert.throws(() => validateSchema({ $ref: "#/nowhere" }, 1), SchemaError);
  });

  test("a $ref cycle stops at the depth bound", () => {
    assert.throws(() => validateSchema({ $ref: "#" }, 1), SchemaError);
  });

  test("a pattern runs only on bounded input", () => {
    const long = "a".repeat(SCHEMA_LIMITS.maxPatternInput + 1);
    bad({ pattern: "^(a+)+$" }, long, "$", /too long/);
  });

  test("a bad pattern is a SchemaError", () => {
    assert.throws(() => validateSchema({ pattern: "(" }, "x"), SchemaError);
  });

  test("a deeply nested value passes the depth bound: SchemaError, not a stack overflow", () => {
    let value = [];
    for (let i = 0; i < 200; i++) value = [value];
    const schema = { $defs: { a: { items: { $ref: "#/$defs/a" } } }, $ref: "#/$defs/a" };
    assert.throws(() => validateSchema(schema, value), SchemaError);
  });
});

// The request-time check, as the Python core's toolschema.check_schema (docs/conformance.md
// ruling 15): the same refusals, naming the same path.
describe("checkSchema", () => {
  const refused = (schema, path, pattern) =>
    assert.throws(
      () => checkSchema(schema, "tools[0].parameters"),
      (exc) => exc instanceof SchemaError && exc.path === path && pattern.test(exc.message),
    );

  test("ordinary schemas pass (draft-07 $schema, local $ref, linear patterns)", () => {
    checkSchema({
      $schema: "http://json-schema.org/draft-07/schema#",
      type: "object",
      properties: { city: { type: "string", pattern: "^[A-Z][a-z]+$" }, n: { $ref: "#/$defs/n" } },
      patternProperties: { "^x-": { type: "string" } },
      $defs: { n: { type: "integer", minimum: 0 } },
      required: ["city"],
    });
    checkSchema({ type: "object", properties: { flag: true, never: false } });
  });

  test("the schema must be an object", () => {
    for (const schema of [undefined, null, true, [], "object"]) {
      refused(schema, "tools[0].parameters", /must be a JSON Schema object/);
    }
  });

  test("a non-local reference anywhere, even unused, is refused", () => {
    refused(
      { type: "object", properties: { a: { $ref: "https://example.com/s.json" } } },
      "tools[0].parameters.properties.a.$ref",
      /only local references/,
    );
    refused(
      { anyOf: [{ type: "string" }, { $dynamicRef: "file:///etc/passwd" }] },
      "tools[0].parameters.anyOf[1].$dynamicRef",
      /only local references/,
    );
    refused({ $defs: { x: { $ref: 5 } } }, "tools[0].parameters.$defs.x.$ref", /only local/);
  });

  test("an unsupported $schema is refused", () => {
    refused(
      { $schema: "http://json-schema.org/draft-03/schema#" },
      "tools[0].parameters.$schema",
      /unsupported \$schema/,
    );
  });

  test("min* bounds over the limit are refused", () => {
    const over = SCHEMA_BOUNDS.maxMinBound + 1;
    refused(
      { properties: { xs: { type: "array", minItems: over } } },
      "tools[0].parameters.properties.xs.minItems",
      /over tokenwire's limit of 4096/,
    );
    checkSchema({ minLength: SCHEMA_BOUNDS.maxMinBound });
  });

  test("patterns: invalid, backreferences, lookarounds and over-long ones are refused", () => {
    refused({ pattern: "(" }, "tools[0].parameters.pattern", /unusable pattern/);
    refused({ pattern: "(a)\\1" }, "tools[0].parameters.pattern", /linear time/);
    refused({ pattern: "^(?!x)" }, "tools[0].parameters.pattern", /linear time/);
    refused({ pattern: "(?<=a)b" }, "tools[0].parameters.pattern", /linear time/);
    refused(
      { pattern: "a".repeat(SCHEMA_BOUNDS.maxPatternLength + 1) },
      "tools[0].parameters.pattern",
      /longer than 1000/,
    );
    refused(
      { patternProperties: { "(": {} } },
      'tools[0].parameters.patternProperties["("]',
      /unusable pattern/,
    );
  });
});

// §8.2 fails closed: an unusable schema rejects every call; it never turns the check off.
describe("fail closed", () => {
  const REMOTE = { type: "object", properties: { a: { $ref: "https://example.com/a.json" } } };
  const tool = (parameters) => ({ name: "t", description: "d", parameters });

  test("schemaProblem: a finding for an unusable schema, null for valid arguments", () => {
    assert.match(schemaProblem(REMOTE, {}), /the tool's schema is unusable, so no call can pass/);
    assert.match(schemaProblem(undefined, {}), /unusable/);
    assert.equal(schemaProblem({ type: "object" }, {}), null);
    assert.match(schemaProblem({ required: ["a"] }, {}), /^\$: the required property "a"/);
  });

  test("the Validator reports invalid-arguments for a call against an unusable schema", () => {
    const frame = (name, fields) =>
      `event: ${name}\ndata: ${JSON.stringify({ v: "1.0", type: name, ...fields })}\n\n`;
    const body =
      frame("stream.start", { seq: 0, model: "m", created: 1 }) +
      frame("tool.call", { seq: 1, index: 0, id: "c1", name: "t", arguments: "{}" }) +
      frame("content.stop", { seq: 2, index: 0, stop_reason: "tool_use" }) +
      frame("usage", { seq: 3, input_tokens: 1, output_tokens: 1 }) +
      frame("stream.end", { seq: 4 });
    const request = { model: "m", messages: [], tools: [tool(REMOTE)] };
    const report = validate(body, { request });
    assert.deepEqual(
      report.violations.map((v) => [v.rule, v.seq]),
      [["invalid-arguments", 1]],
    );
    assert.match(report.violations[0].message, /unusable/);
    // A usable schema the arguments match: conformant.
    assert.deepEqual(validate(body, { request: { ...request, tools: [tool({})] } }).violations, []);
  });

  test("the Client refuses an unusable tool schema before sending anything", () => {
    let fetched = 0;
    const client = new Client({ baseURL: "http://gateway.test", fetch: async () => fetched++ });
    const request = { model: "demo", messages: [{ role: "user", content: "hi" }] };
    assert.throws(
      () => client.stream({ ...request, tools: [tool({}), tool(REMOTE)] }),
      (exc) => exc instanceof SchemaError && exc.path === "tools[1].parameters.properties.a.$ref",
    );
    assert.throws(() => prepareRequest({ ...request, tools: [{ name: "t" }] }), SchemaError);
    assert.equal(fetched, 0);
    assert.ok(prepareRequest({ ...request, tools: [tool({ type: "object" })] }));
  });
});
