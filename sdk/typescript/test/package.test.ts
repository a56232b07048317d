// The npm package's shape: what npm pack puts in it, and its exports.
import { strict as assert } from "node:assert";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { it } from "node:test";

import { repoRoot } from "./harness.js";

it("packs the built code, its sources and types, the README and the license, and nothing of the tests", () => {
  const res = spawnSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: join(repoRoot, "sdk/typescript"), encoding: "utf8" });
  assert.equal(res.status, 0, res.stderr);
  const [pkg] = JSON.parse(res.stdout) as { name: string; files: { path: string }[] }[];
  const files = pkg!.files.map((f) => f.path);
  for (const want of ["LICENSE", "README.md", "package.json", "dist/index.js", "dist/index.d.ts", "src/index.ts", "dist/gen/rdq/v1/rdq_pb.js"]) {
    assert.ok(files.includes(want), `the package lacks ${want}`);
  }
  assert.deepEqual(files.filter((f) => /^(test|build|examples|bench|node_modules)\//.test(f)), []);
});

it("resolves every entry of its exports map by the package's name", async () => {
  const root = await import("@srjn45/rdq");
  assert.equal(typeof root.RdqClient, "function");
  assert.equal(typeof root.createReceiver, "function");
  const rdq = await import("@srjn45/rdq/gen/rdq/v1/rdq_pb");
  assert.equal(rdq.RdqService.typeName, "rdq.v1.RdqService");
  const handler = await import("@srjn45/rdq/gen/rdq/v1/handler_pb");
  assert.equal(handler.HandlerService.typeName, "rdq.v1.HandlerService");
});
