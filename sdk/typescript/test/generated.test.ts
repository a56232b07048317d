// The committed generated code is what buf.gen.yaml makes from the proto
// today, and the package states one version.
import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { it } from "node:test";

import { VERSION } from "../src/index.js";
import { repoRoot } from "./harness.js";

const sdk = join(repoRoot, "sdk/typescript");

function files(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        walk(p);
      } else {
        out.set(relative(dir, p), readFileSync(p, "utf8"));
      }
    }
  };
  walk(dir);
  return out;
}

it("src/gen is what npm run generate writes from proto/", () => {
  const tmp = mkdtempSync(join(tmpdir(), "rdq-ts-gen-"));
  try {
    const template = readFileSync(join(sdk, "buf.gen.yaml"), "utf8").replace("out: src/gen", `out: ${JSON.stringify(tmp)}`);
    assert.notEqual(template, readFileSync(join(sdk, "buf.gen.yaml"), "utf8"), "buf.gen.yaml writes to src/gen");
    // The googleapis protos the REST annotations import, as npm run
    // generate fetches them (once: proto/.googleapis keeps them).
    const fetch = spawnSync("sh", [join(repoRoot, "proto/fetch-googleapis.sh")], { encoding: "utf8" });
    assert.equal(fetch.status, 0, `fetch-googleapis.sh failed: ${fetch.stderr}${fetch.error?.message ?? ""}`);
    const bin = join(sdk, "node_modules/.bin");
    const res = spawnSync(join(bin, "buf"), ["generate", "../../proto", "--template", template], {
      cwd: sdk,
      encoding: "utf8",
      env: { ...process.env, PATH: `${bin}:${process.env["PATH"] ?? ""}` },
    });
    assert.equal(res.status, 0, `buf generate failed: ${res.stderr}${res.error?.message ?? ""}`);
    const want = files(tmp);
    const got = files(join(sdk, "src/gen"));
    assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort());
    for (const [name, text] of want) {
      assert.ok(got.get(name) === text, `src/gen/${name} is stale: run npm run generate in sdk/typescript and commit the result`);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

it("VERSION is package.json's version", () => {
  const pkg = JSON.parse(readFileSync(join(sdk, "package.json"), "utf8")) as { version: string };
  assert.equal(VERSION, pkg.version);
});
