import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { InvalidError } from "./errors.js";
import { TaskSpecSchema, type TaskSpec } from "./gen/rdq/v1/rdq_pb.js";

/** The version of the wire envelope this package writes and reads. */
export const ENVELOPE_VERSION = 1;

function invalid(why: string): InvalidError {
  return new InvalidError(`rdq: the envelope is not a valid submission: ${why}`, "invalid_argument", Code.InvalidArgument);
}

/**
 * firstRepeatedKey returns a key repeated in one object of JSON document
 * doc (after unescaping), or undefined. doc must be valid JSON.
 */
export function firstRepeatedKey(doc: string): string | undefined {
  const stack: (Set<string> | null)[] = [];
  let expectKey = false;
  for (let i = 0; i < doc.length; i++) {
    const c = doc[i];
    if (c === '"') {
      let j = i + 1;
      while (doc[j] !== '"') {
        j += doc[j] === "\\" ? 2 : 1;
      }
      const top = stack.at(-1);
      if (expectKey && top) {
        const key = JSON.parse(doc.slice(i, j + 1)) as string;
        if (top.has(key)) {
          return key;
        }
        top.add(key);
        expectKey = false;
      }
      i = j;
    } else if (c === "{") {
      stack.push(new Set());
      expectKey = true;
    } else if (c === "[") {
      stack.push(null);
    } else if (c === "}" || c === "]") {
      stack.pop();
    } else if (c === ",") {
      expectKey = stack.at(-1) !== null && stack.length > 0;
    }
  }
  return undefined;
}

/**
 * parseSubmission reads a submission in rdq's JSON wire envelope (see
 * envelope/testdata/README.md in the repository): version 1, queue,
 * handler, base64 payload, content type, headers, idempotency key,
 * delay_ms, max_attempts, timeout_ms. It refuses, with an InvalidError
 * saying why, what is not JSON, a key repeated in any object, another
 * version, a member a submission does not have and a value of the wrong
 * type; the server checks the rest (names, limits) when it is submitted.
 */
export function parseSubmission(doc: string): TaskSpec {
  let value: unknown;
  try {
    value = JSON.parse(doc);
  } catch (e) {
    throw invalid(`it is not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  const repeated = firstRepeatedKey(doc);
  if (repeated !== undefined) {
    throw invalid(`key ${JSON.stringify(repeated)} appears twice in one object`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw invalid("it must be a JSON object");
  }
  const version = (value as Record<string, unknown>)["version"];
  if (version !== ENVELOPE_VERSION) {
    throw invalid(`version must be ${ENVELOPE_VERSION}, not ${JSON.stringify(version)}`);
  }
  try {
    return fromJson(TaskSpecSchema, value as JsonValue);
  } catch (e) {
    throw invalid(e instanceof Error ? e.message : String(e));
  }
}
