/**
 * Run against a live server (tests/server/test_typescript_client.py starts one):
 *
 *     WOVYR_SERVER=http://127.0.0.1:PORT WOVYR_API_KEY=wvr_... node dist/test/live.js
 *
 * Starts, reads, lists (every page), signals, waits for and cancels executions through
 * the client, checks what comes back, and prints what it saw as one JSON line. Any check
 * that fails exits non-zero with the reason.
 */

import { WovyrClient, WovyrError } from "../src/index.js";

const FLOW = `
apiVersion: wovyr/v1
kind: Workflow
metadata: {name: ts-live}
inputs: {who: {type: string, default: nobody}}
activities:
  - {id: gate, wait: {signal: go}}
  - {id: greet, needs: [gate], set: {value: "hello \${{ inputs.who }}"}}
output: {value: "\${{ activities.greet.output.value }}"}
`;

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`check failed: ${what}`);
}

async function main(): Promise<void> {
  const wovyr = new WovyrClient({
    baseUrl: process.env["WOVYR_SERVER"] ?? "",
    apiKey: process.env["WOVYR_API_KEY"],
  });
  const started = await wovyr.start({ definition: FLOW, input: { who: "ts" }, id: "ts-1" });
  check(started.id === "ts-1" && started.status !== "completed", "started and waiting");
  const again = await wovyr.start({ definition: FLOW, id: "ts-1" });
  check(again.id === "ts-1", "the same id answers the same execution");
  for (const id of ["ts-2", "ts-3"]) await wovyr.start({ definition: FLOW, id });

  const seen: string[] = [];
  for await (const summary of wovyr.iterate({ workflow: "ts-live", limit: 1 })) {
    seen.push(summary.id);
  }
  const whole = (await wovyr.list({ workflow: "ts-live", limit: 100 })).items.map((s) => s.id);
  check(JSON.stringify(seen) === JSON.stringify(whole), "iterate walks every page in order");

  await wovyr.signal("ts-1", "go");
  const done = await wovyr.wait("ts-1", { timeoutMs: 60_000, intervalMs: 100 });
  check(done.status === "completed", `ts-1 completed (${done.status})`);
  const cancelled = await wovyr.cancel("ts-2", "not needed");
  check(cancelled.status === "cancelled", "ts-2 cancelled");

  let missing: WovyrError | undefined;
  try {
    await wovyr.get("no-such-run");
  } catch (error) {
    if (error instanceof WovyrError) missing = error;
  }
  check(missing?.status === 404, "a missing execution is a 404 WovyrError");
  check(missing?.problem?.type === "urn:wovyr:problem:not-found", "with its problem");

  console.log(
    JSON.stringify({
      listed: seen,
      output: done.output,
      cancelled: cancelled.status,
      missing: missing?.problem?.type,
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
