"""The human table of bench_postgres.py (then the JSON on one line)."""

from __future__ import annotations

import json
from typing import Any


def report(results: dict[str, Any]) -> None:
    if "b0" in results:
        r = results["b0"]
        print(
            f"B0  PostgreSQL fsync'd single-row commits/s: {r['connections_1']:,.0f} (1 conn), "
            f"{r['connections_4']:,.0f} (4 conns)"
        )
    if "l1" in results:
        r = results["l1"]
        print(f"L1  pickup latency, 5 s poll: p50 {r['p50_ms']:.1f} ms, max {r['max_ms']:.1f} ms")
    if "b2" in results:
        b2r = results["b2"]
        for n in (1, 2, 4):
            r = b2r[f"workers_{n}"]
            print(
                f"B2  {n} worker process(es): {r['workflows_per_s']:7.1f} wf/s "
                f"({r['seconds']:.2f} s), {r['durable_commits_per_workflow']:.2f} commits/wf, "
                f"{r['steps_per_group_commit']:.1f} steps/commit, claims {r['claims_by_worker']}"
            )
            print(
                f"      machine CPU busy {r['machine_cpu_busy']:.0%} (before: "
                f"{r['background_cpu_busy_before']:.0%}), CPU per workflow: workers "
                f"{r['worker_cpu_ms_per_workflow']:.2f} ms + PostgreSQL "
                f"{r['postgres_cpu_ms_per_workflow']:.2f} ms; in store.commit "
                f"{r['commit_wall_share']:.0%} of the time "
                f"({r['commit_ms_per_batch']:.1f} ms/batch)"
            )
        print(
            f"B2  w2/w1 {b2r['w2_over_w1']:.2f} (target 1.6), w4/w1 {b2r['w4_over_w1']:.2f}; "
            f"w1 = {b2r['w1_share_of_b0_over_5']:.0%} of B0/5 (target 30%)"
        )
        apart = b2r["apart_2"]
        print(
            f"B2  control: two 1-worker queues in separate schemas, together: "
            f"{apart['workflows_per_s']:.1f} wf/s = {b2r['apart_over_w1']:.2f} x w1 "
            f"(machine CPU busy {apart['machine_cpu_busy']:.0%}): what this machine allows "
            "two workers that share nothing"
        )
        if len(b2r["rounds"]) > 1:
            print(
                "B2  by round: w1 "
                + ", ".join(f"{v:.0f}" for v in b2r["w1_by_round"])
                + " wf/s; w2/w1 "
                + ", ".join(f"{v:.2f}" for v in b2r["w2_over_w1_by_round"])
                + "; w4/w1 "
                + ", ".join(f"{v:.2f}" for v in b2r["w4_over_w1_by_round"])
                + "; two apart / w1 "
                + ", ".join(f"{v:.2f}" for v in b2r["apart_over_w1_by_round"])
                + "; w2 / two apart "
                + ", ".join(f"{v:.2f}" for v in b2r["w2_over_apart_by_round"])
                + "; other load before "
                + ", ".join(f"{v:.0%}" for v in b2r["background_by_round"])
            )
    if "b2io" in results:
        r = results["b2io"]
        print(
            f"B2io tool waits {r['activity_ms']:.0f} ms: w1 "
            + ", ".join(f"{v:.0f}" for v in r["w1_by_round"])
            + " wf/s; w2 "
            + ", ".join(f"{v:.0f}" for v in r["w2_by_round"])
            + " wf/s; w2/w1 "
            + ", ".join(f"{v:.2f}" for v in r["w2_over_w1_by_round"])
            + " (machine CPU busy with 2: "
            + ", ".join(f"{v:.0%}" for v in r["machine_cpu_busy_w2_by_round"])
            + ")"
        )
    if "b5" in results:
        r = results["b5"]
        print(
            f"B5  {r['executions']:,} expired leases re-leased in "
            f"{r['seconds_until_all_leased']:.2f} s ({r['executions_per_s']:,.0f}/s, "
            f"{r['claim_statements']} claim statements)"
        )
    if "b8" in results:
        for label, r in results["b8"].items():
            print(
                f"B8  {label:28s} p50 {r['p50_ms']:6.2f} ms  p99 {r['p99_ms']:6.2f} ms "
                f"({r['pages']} pages, {r['rows']} rows)  index {r['index']}, seq scan "
                f"{'YES' if r['seq_scan'] else 'no'}, rows filtered {r['rows_removed_by_filter']}"
            )
    print(json.dumps(results, default=str))
