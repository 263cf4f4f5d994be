// The JSON Schema subset the §8.2 tool-call checks use, and its safety bounds.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { MODULE } from "./helpers.mjs";

const { validateSchema, SchemaError, SCHEMA_LIMITS } = await import(MODULE);

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
