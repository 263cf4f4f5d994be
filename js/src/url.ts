/**
 * The one URL grammar, the twin of the Python client's `tokenwire/client/_url.py`:
 * what a user gives for "the gateway" -> its base URL and its stream URL.
 * Both are tested on one table, tests/vectors/url/grammar.json.
 *
 * - `127.0.0.1:8080` or `localhost:8080` (no scheme) means `http://`;
 * - `http://h:p`, `http://h:p/`, `http://h:p/v1` and `http://h:p/v1/stream` name
 *   one endpoint; any other path is a prefix the gateway is mounted under;
 * - a vendor route (`/v1/chat/completions`, `/v1/messages`, Gemini's
 *   `:streamGenerateContent`...) or another gateway route given by mistake is
 *   refused with a one-line error that names it and says what to pass;
 * - the query is kept on the stream URL; a fragment is dropped.
 *
 * String slicing, not `URL`: WHATWG `URL` and Python's `urlsplit` normalise
 * differently, and both languages must give the same bytes.
 * @module
 */
import { TokenwireError } from "./errors.js";

/** Where an endpoint takes requests, below its base URL. */
export const STREAM_PATH = "/v1/stream";

/** What {@link endpoint} reads. */
export interface Endpoint {
  /** `scheme://authority[/prefix]`, no trailing slash, no query. */
  base: string;
  /** `base + "/v1/stream" + query`: what standard requests are POSTed to. */
  stream: string;
  /** `""` or `"?..."` as given. */
  query: string;
}

const ROUTES: ReadonlyArray<[RegExp, string]> = [
  [/\/v1\/chat\/completions$/, "the OpenAI Chat Completions route"],
  [/\/v1\/completions$/, "the OpenAI legacy completions route"],
  [/\/v1\/responses(\/input_tokens)?$/, "the OpenAI Responses route"],
  [/\/v1\/messages(\/count_tokens)?$/, "the Anthropic Messages route"],
  [/\/v2\/chat$/, "the Cohere chat route"],
  [/\/v1(beta|alpha)?\/models\/[^/]*:[A-Za-z]+$/, "a Gemini model route"],
  [/\/v1\/models(\/[^/]*)?$/, "the models list"],
  [/\/v1\/streams(\/[^/]*)?$/, "the resume route"],
  [/\/(healthz|metrics)$/, "a monitoring route"],
  [/\/v1\/.+$/, "a route below /v1"],
];
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//;
const PASS_EXAMPLE =
  "pass the gateway's base URL (http://127.0.0.1:8080) or its stream URL " +
  "(http://127.0.0.1:8080/v1/stream)";

/** An error of the URL grammar: one line, naming what was given and what to pass. */
export class URLGrammarError extends TokenwireError {}

function firstOf(text: string, chars: string): number {
  const found = [...chars].map((c) => text.indexOf(c)).filter((i) => i >= 0);
  return found.length ? Math.min(...found) : text.length;
}

/**
 * The endpoint `url` names: its base URL and its stream URL.
 * @throws {@link URLGrammarError} for an empty URL, a scheme other than
 *   http(s), no host, or a path that is another route.
 */
export function endpoint(url: string | URL): Endpoint {
  // Python's str.strip() and JavaScript's trim() differ on a few code points; the
  // grammar's whitespace is ASCII plus what both agree on.
  const given = String(url).trim();
  if (!given) throw new URLGrammarError(`no URL given: ${PASS_EXAMPLE}`);
  if (/\s/.test(given)) throw new URLGrammarError(`${given} has a space in it: ${PASS_EXAMPLE}`);
  const m = SCHEME.exec(given);
  const scheme = m ? m[1]!.toLowerCase() : "http";
  let rest = m ? given.slice(m[0].length) : given;
  if (scheme !== "http" && scheme !== "https") {
    throw new URLGrammarError(`${given} is not an http:// or https:// URL: ${PASS_EXAMPLE}`);
  }
  rest = rest.split("#", 1)[0]!;
  const cut = firstOf(rest, "/?");
  const authority = rest.slice(0, cut);
  rest = rest.slice(cut);
  if (!authority || authority.startsWith(":")) {
    throw new URLGrammarError(`${given} names no host: ${PASS_EXAMPLE}`);
  }
  const qcut = firstOf(rest, "?");
  let path = rest.slice(0, qcut).replace(/\/+$/, "");
  const query = rest.slice(qcut);
  const origin = `${scheme}://${authority}`;
  if (path.endsWith(STREAM_PATH)) {
    path = path.slice(0, -STREAM_PATH.length);
  } else if (path.endsWith("/v1")) {
    path = path.slice(0, -3);
  } else {
    for (const [pattern, name] of ROUTES) {
      const found = pattern.exec(path);
      if (found) {
        const prefix = origin + path.slice(0, found.index);
        throw new URLGrammarError(
          `${origin + path} is ${name}, not an LLM-Stream endpoint: pass the ` +
            `gateway's base URL (${prefix}) or its stream URL (${prefix}${STREAM_PATH})`,
        );
      }
    }
  }
  const base = origin + path;
  return { base, stream: base + STREAM_PATH + query, query };
}
