#!/usr/bin/env python3
"""A long fuzz run that goes on past findings, and totals what it did.

libFuzzer stops at its first finding. For the long runs `README.md` reports (a million
executions or a time budget on one core), this runs the target binary again on the corpus grown
so far after each finding, until the executions or the seconds are spent, keeps each finding
under `<out>/findings/`, and prints one line per segment and a total:

    python3 long_run.py BINARY OUT --runs 1000000 --seconds 7200 [SEED_DIR ...]

BINARY is a built target (e.g. `target-nosan/x86_64-unknown-linux-gnu/release/hostile_broker`,
copied out first so a rebuild does not replace it mid-run). OUT holds the growing corpus
(`OUT/corpus`), the findings and each segment's log. Seed directories are read, never written.
"""

import argparse
import os
import re
import subprocess
import sys
import time

STATS = re.compile(r"^#(\d+)\s+\S+\s+cov: (\d+) ft: (\d+) corp: (\S+)")
EXECUTED = re.compile(r"stat::number_of_executed_units: (\d+)")
FINDING = re.compile(r"Test unit written to (\S+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("out")
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--seconds", type=int, default=7200)
    ap.add_argument("--max-findings", type=int, default=20)
    ap.add_argument("seeds", nargs="*")
    a = ap.parse_intermixed_args()

    corpus = os.path.join(a.out, "corpus")
    findings = os.path.join(a.out, "findings") + "/"
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(findings, exist_ok=True)
    start = time.monotonic()
    total, segment, found = 0, 0, []
    last_stats = ""
    while total < a.runs and len(found) <= a.max_findings:
        left_s = int(a.seconds - (time.monotonic() - start))
        if left_s <= 0:
            break
        segment += 1
        log_path = os.path.join(a.out, f"segment-{segment}.log")
        t0 = time.monotonic()
        with open(log_path, "w") as log:
            rc = subprocess.call(
                [a.binary, corpus, *a.seeds, f"-runs={a.runs - total}",
                 f"-max_total_time={left_s}", "-rss_limit_mb=4096",
                 f"-artifact_prefix={findings}", "-print_final_stats=1"],
                stdout=log, stderr=subprocess.STDOUT)
        took = time.monotonic() - t0
        executed, finding = 0, None
        for line in open(log_path, errors="replace"):
            if m := STATS.match(line):
                executed = max(executed, int(m.group(1)))
                last_stats = line.strip()
            if m := EXECUTED.search(line):
                executed = int(m.group(1))
            if m := FINDING.search(line):
                finding = m.group(1)
        total += executed
        if finding:
            found.append(finding)
        print(f"segment {segment}: {executed} executions in {took:.0f} s "
              f"({executed / max(took, 1e-9):.0f} exec/s), exit {rc}, "
              f"{'finding ' + finding if finding else 'no finding'}; last: {last_stats}",
              flush=True)
        if rc != 0 and not finding:
            print(f"segment {segment} failed without a finding: see {log_path}", file=sys.stderr)
            return 1
    took = time.monotonic() - start
    print(f"total: {total} executions in {took:.0f} s ({total / max(took, 1e-9):.0f} exec/s), "
          f"{segment} segments, {len(found)} findings {found}; last: {last_stats}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
