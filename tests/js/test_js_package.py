"""The npm package ``tokenwire`` (js/): its node tests, the served bundle, ``npm pack``.

- ``node --test js/test/*.test.mjs`` on the built package: the Python
  project's SSE and lifecycle vectors, the Client (resume, cancel, §8.2
  tool-call checks, errors) and the real ``ai`` package through the
  provider, both against ``tokenwire serve`` (the demo model) started here;
- the file the gateway serves, ``static/tokenwire.js``, is exactly the
  browser build of js/src (so ``make run`` never needs Node);
- ``npm pack`` gives a tarball that installs offline in an empty folder and
  works there.
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

from tests.js.npm import BROWSER_BUILD, JS, STATIC, JSPackage
from tests.playground.servers import ServerProcess


def _summary(stdout: str) -> dict[str, int]:
    counts = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#" and parts[2].isdigit():
            counts[parts[1]] = int(parts[2])
    return counts


def test_node_tests_on_the_built_package(js_package: JSPackage, gateway: ServerProcess) -> None:
    files = sorted(str(p.relative_to(JS)) for p in (JS / "test").glob("*.test.mjs"))
    assert {"sse.test.mjs", "lifecycle.test.mjs", "client.test.mjs", "ai-sdk.test.mjs"} <= {
        Path(f).name for f in files
    }
    out = js_package.run(
        js_package.node, "--test", *files, env={"TOKENWIRE_GATEWAY": gateway.url}, timeout=600
    )
    counts = _summary(out)
    assert counts.get("fail") == 0, out[-6000:]
    # Every test really ran: the gateway was given, so nothing may skip.
    assert counts.get("skipped", 0) == 0 and counts.get("cancelled", 0) == 0, out[-6000:]
    assert "# SKIP" not in out, [line for line in out.splitlines() if "# SKIP" in line]
    assert counts.get("pass", 0) > 600, counts


def test_the_sources_are_formatted(js_package: JSPackage) -> None:
    js_package.run(js_package.npm, "run", "format:check")


def test_the_served_tokenwire_js_is_the_build_of_js_src(js_package: JSPackage) -> None:
    # ensure_built() ran `npm run build`: dist/tokenwire.browser.js is fresh from js/src.
    built = BROWSER_BUILD.read_bytes()
    assert STATIC.read_bytes() == built, (
        "src/tokenwire/gateway/static/tokenwire.js is not the build of js/src: "
        "run `npm run build:static` in js/ and commit the result"
    )
    assert b"export {" in built and b"SSEDecoder" in built


def test_npm_pack_installs_offline_and_works(js_package: JSPackage, tmp_path: Path) -> None:
    out = js_package.run(js_package.npm, "pack", "--json", "--pack-destination", str(tmp_path))
    info = json.loads(out)[0]
    tarball = tmp_path / info["filename"]
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    assert {"package/dist/index.js", "package/dist/index.d.ts", "package/dist/ai-sdk.d.ts"} <= names
    assert "package/package.json" in names
    assert not any(
        n.startswith(("package/src/", "package/test/", "package/node_modules/")) for n in names
    )

    app = tmp_path / "app"
    app.mkdir()
    (app / "package.json").write_text(
        json.dumps({"name": "app", "private": True, "type": "module"})
    )
    js_package.run(
        js_package.npm, "install", "--offline", "--no-audit", "--no-fund", str(tarball), cwd=app
    )
    installed = json.loads((app / "node_modules" / "tokenwire" / "package.json").read_text())
    assert installed["name"] == "tokenwire"
    assert not installed.get("dependencies"), "the package has no runtime dependencies"
    shutil.copy(JS / "test" / "pack-smoke.mjs", app / "smoke.mjs")
    # The declarations work for a TypeScript user (strict, Node ESM resolution).
    shutil.copy(JS / "test" / "pack-consumer.ts", app / "consumer.ts")
    tsconfig = {
        "compilerOptions": {
            "strict": True,
            "noEmit": True,
            "module": "NodeNext",
            "moduleResolution": "NodeNext",
            "target": "ES2022",
            "lib": ["ES2022", "DOM", "DOM.Iterable"],
            "types": [],
        },
        "files": ["consumer.ts"],
    }
    (app / "tsconfig.json").write_text(json.dumps(tsconfig))
    tsc = JS / "node_modules" / "typescript" / "bin" / "tsc"
    js_package.run(js_package.node, str(tsc), "-p", "tsconfig.json", cwd=app)

    result = json.loads(js_package.run(js_package.node, "smoke.mjs", cwd=app))
    assert result == {
        "types": ["stream.start", "content.delta", "content.stop", "usage", "stream.end"],
        "text": "hé",
        "ok": True,
        "version": "1.0",
        "client": "function",
        "spec": "v3",
    }
