// The one URL grammar (src/url.ts) on the table the Python client is tested on
// (tests/vectors/url/grammar.json, tests/client/test_url_grammar.py).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";

import { MODULE, VECTORS } from "./helpers.mjs";

const { Client, endpoint, URLGrammarError } = await import(MODULE);
const { cases } = JSON.parse(readFileSync(join(VECTORS, "url", "grammar.json"), "utf8"));

describe("the URL grammar (tests/vectors/url/grammar.json)", () => {
  test("the table has both kinds", () => {
    assert.ok(cases.filter((c) => c.error).length >= 8);
    assert.ok(cases.filter((c) => !c.error).length >= 10);
  });

  for (const c of cases) {
    test(`endpoint(${JSON.stringify(c.in)})`, () => {
      if (c.error) {
        assert.throws(
          () => endpoint(c.in),
          (e) => e instanceof URLGrammarError && e.message === c.error,
        );
        assert.throws(
          () => new Client({ baseURL: c.in }),
          (e) => e.message === c.error,
        );
      } else {
        const found = endpoint(c.in);
        assert.deepEqual([found.base, found.stream], [c.base, c.stream]);
      }
    });

    if (!c.error) {
      test(`Client({ baseURL: ${JSON.stringify(c.in)} }) posts to the stream URL`, async () => {
        const posted = [];
        const fetch = async (url) => {
          posted.push(String(url));
          return new Response('{"error":{"code":"invalid_request","message":"x"}}', {
            status: 400,
            headers: { "content-type": "application/json" },
          });
        };
        const client = new Client({ baseURL: c.in, fetch, resume: false });
        await assert.rejects(async () => {
          for await (const _ of client.stream({ model: "demo", messages: [] })) {
            // nothing arrives: the answer is a 400
          }
        });
        assert.deepEqual(posted, [c.stream]);
      });
    }
  }
});
