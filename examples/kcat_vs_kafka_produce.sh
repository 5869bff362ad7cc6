#!/usr/bin/env bash
# `kafka-produce -K :` beside `kcat -P -K :` (Debian's kcat, installed by this script with
# apt-get when missing), each at its shipped defaults (no -X setting: kafka-produce's 16 KiB
# batches and 5 ms linger, kcat's librdkafka 1,000,000-byte batches and 5 ms linger; acks=all
# for both), producing the same generated file of keyed 100-byte lines to a 3-node Apache
# Kafka from the test tier (`producer-tests`'s `kafka_cluster`, replication 3, Kafka fetched
# by Maven on first use).
#
#   examples/kcat_vs_kafka_produce.sh                  # 1,000,000 lines, 3 rounds
#   LINES=100000 ROUNDS=1 examples/kcat_vs_kafka_produce.sh
#
# The input is generated once (LINES lines of exactly 100 bytes, "key-N:" then filler, 65,536
# distinct keys). Each round runs both tools, alternating which goes first, each into a topic
# of its own (12 partitions) so each starts from an empty log. Elapsed seconds, CPU seconds
# (user+sys) and peak RSS come from /usr/bin/time (installed with apt-get when missing); each
# run must deliver every line (kafka-produce's own count; kcat's counted by consuming the
# topic back), or the script stops. Prints every run and the medians as a Markdown table on
# stdout; logs go to target/kcat_vs_kafka_produce/.
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=${LINES:-1000000}
ROUNDS=${ROUNDS:-3}
OUT=target/kcat_vs_kafka_produce
mkdir -p "$OUT"

install() {
    command -v apt-get >/dev/null || { echo "$1 is missing and apt-get is not here" >&2; exit 2; }
    echo "installing $1 (apt-get)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >&2
}
command -v kcat >/dev/null || install kcat
[ -x /usr/bin/time ] || install time

# Release builds of both (the cluster launcher too: one profile, one set of artifacts), in
# CARGO_TARGET_DIR when set.
TARGET=${CARGO_TARGET_DIR:-target}
cargo build --release -p kafka-produce >&2
cargo build --release -p producer-tests --bin kafka_cluster >&2

INPUT=$OUT/keyed-$LINES.txt
if [ ! -s "$INPUT" ]; then
    awk -v n="$LINES" 'BEGIN {
        filler = "";
        for (i = 0; i < 100; i++) filler = filler sprintf("%c", 97 + (i * 7) % 26);
        for (i = 0; i < n; i++) {
            key = sprintf("key-%05d:", i % 65536);
            print key substr(filler, 1, 99 - length(key));
        }
    }' >"$INPUT"
fi

TOPIC_ARGS=()
for r in $(seq 1 "$ROUNDS"); do TOPIC_ARGS+=(--topic "kp$r:12" --topic "kcat$r:12"); done

# The cluster runs while its stdin is open: a FIFO held by this shell.
FIFO=$OUT/cluster.stdin
rm -f "$FIFO"
mkfifo "$FIFO"
"$TARGET/release/kafka_cluster" --nodes 3 "${TOPIC_ARGS[@]}" <"$FIFO" >"$OUT/cluster.out" \
    2>"$OUT/cluster.err" &
CLUSTER=$!
exec 3>"$FIFO"
trap 'exec 3>&-; wait $CLUSTER 2>/dev/null || true; rm -f "$FIFO"' EXIT
for _ in $(seq 1 600); do
    grep -q '^BOOTSTRAP ' "$OUT/cluster.out" 2>/dev/null && break
    kill -0 $CLUSTER 2>/dev/null || { cat "$OUT/cluster.err" >&2; exit 1; }
    sleep 0.5
done
BOOTSTRAP=$(sed -n 's/^BOOTSTRAP //p' "$OUT/cluster.out")
[ -n "$BOOTSTRAP" ] || { echo "the cluster did not start" >&2; exit 1; }
echo "3-node cluster at $BOOTSTRAP; input $INPUT ($LINES lines)" >&2

# Runs "$@" under /usr/bin/time; prints "SECONDS CPU_SECONDS MAXRSS_KB".
measure() {
    local name=$1
    shift
    /usr/bin/time -o "$OUT/$name.time" -f '%e %U %S %M' "$@" >"$OUT/$name.out" \
        2>"$OUT/$name.err" || {
        echo "$name failed:" >&2
        tail -5 "$OUT/$name.err" >&2
        exit 1
    }
    tail -1 "$OUT/$name.time" | awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }'
}

run_kafka_produce() {
    local r=$1 m
    m=$(measure "kafka-produce-$r" "$TARGET/release/kafka-produce" -q -b "$BOOTSTRAP" -t "kp$r" \
        -K : --failed "$OUT/kafka-produce-$r.failed" "$INPUT")
    grep -q "read $LINES records: delivered $LINES, failed 0" "$OUT/kafka-produce-$r.err" || {
        echo "kafka-produce (round $r) did not deliver every line:" >&2
        cat "$OUT/kafka-produce-$r.err" >&2
        exit 1
    }
    echo "kafka-produce $m" >>"$OUT/results"
}

run_kcat() {
    local r=$1 m n
    m=$(measure "kcat-$r" kcat -P -q -b "$BOOTSTRAP" -t "kcat$r" -K : -l "$INPUT")
    # kcat says nothing of what it delivered: count what the topic holds.
    n=$(kcat -C -q -b "$BOOTSTRAP" -t "kcat$r" -o beginning -e | wc -l)
    [ "$n" = "$LINES" ] || { echo "kcat (round $r) delivered $n of $LINES lines" >&2; exit 1; }
    echo "kcat $m" >>"$OUT/results"
}

: >"$OUT/results"
for r in $(seq 1 "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then run_kafka_produce "$r"; run_kcat "$r"; else run_kcat "$r"; run_kafka_produce "$r"; fi
done

echo "$LINES keyed 100-byte lines (\`-K :\`), each tool at its shipped defaults, a 3-node Apache"
echo "Kafka (replication 3, 12 partitions); $ROUNDS round(s), median of each column:"
echo
echo "| tool | records/s | elapsed s | CPU-s (user+sys) | peak RSS MiB |"
echo "|---|---|---|---|---|"
for tool in kafka-produce kcat; do
    awk -v tool="$tool" -v lines="$LINES" '
        function median(a, n,   i, j, t) {
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        $1 == tool { n++; e[n] = $2; c[n] = $3; m[n] = $4 }
        END {
            me = median(e, n); mc = median(c, n); mm = median(m, n);
            printf "| %s | %d | %.2f | %.2f | %.1f |\n", tool, lines / me, me, mc, mm / 1024
        }' "$OUT/results"
done
