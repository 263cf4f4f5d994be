// The browser bundle: js/src/index.ts as one ES module, dist/tokenwire.browser.js.
// With --static it is also copied to the file the gateway serves,
// src/tokenwire/gateway/static/tokenwire.js (committed; a test checks it is current).
import { copyFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const HERE = dirname(dirname(fileURLToPath(import.meta.url)));
const OUT = join(HERE, "dist", "tokenwire.browser.js");
const STATIC = join(HERE, "..", "src", "tokenwire", "gateway", "static", "tokenwire.js");

const BANNER = `/**
 * tokenwire.js: the browser build of the \`tokenwire\` npm package (js/ in the
 * tokenwire repository), served by the gateway at /static/tokenwire.js.
 *
 * GENERATED from js/src by \`npm run build:static\`: do not edit; change
 * js/src and rebuild (tests/js/test_js_package.py checks this file is current).
 */`;

await build({
  absWorkingDir: HERE,
  entryPoints: ["src/index.ts"],
  outfile: OUT,
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  charset: "utf8",
  legalComments: "none",
  banner: { js: BANNER },
  logLevel: "warning",
});

if (process.argv.includes("--static")) {
  copyFileSync(OUT, STATIC);
  console.log(`copied ${OUT} -> ${STATIC}`);
}
