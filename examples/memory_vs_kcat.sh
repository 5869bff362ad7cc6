#!/usr/bin/env bash
# Peak RSS of `kafka-produce -K :` at buffer.memory 8, 32 and 128 MiB beside `kcat -P -K :`
# (Debian's kcat: `apt-get install -y kcat`), each producing the same generated file of keyed
# 100-byte lines to the same single-node Apache Kafka from the test tier
# (`producer-tests`'s `kafka_cluster`, Kafka fetched by Maven on first use).
#
#   examples/memory_vs_kcat.sh                 # 1,000,000 lines, buffers 8 32 128 MiB
#   LINES=200000 BUFFERS="8 32" examples/memory_vs_kcat.sh
#
# Every producer gets a topic of its own (12 partitions), so each run starts from an empty log;
# kcat runs with its defaults (librdkafka's 1 GiB / 100,000-message queue) and then with its
# queue (`queue.buffering.max.kbytes`) set to each buffer size. Peak RSS is `/usr/bin/time`'s
# maximum resident set size. Each run must deliver every line: the script stops otherwise.
# Prints one table (Markdown) to stdout; logs go to target/memory_vs_kcat/.
set -euo pipefail
cd "$(dirname "$0")/.."

LINES=${LINES:-1000000}
BUFFERS=${BUFFERS:-"8 32 128"}
OUT=target/memory_vs_kcat
mkdir -p "$OUT"

command -v kcat >/dev/null || { echo "kcat is not installed (apt-get install -y kcat)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "/usr/bin/time is missing (apt-get install -y time)" >&2; exit 2; }

cargo build --release -p kafka-produce >&2
cargo build -p producer-tests --bin kafka_cluster >&2

# The input: LINES lines of exactly 100 bytes, "key-N:" then filler (65,536 distinct keys).
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

# Topics: one per run.
TOPICS=()
for b in $BUFFERS; do TOPICS+=("kp$b" "kcat$b"); done
TOPICS+=(kcatdefault)
TOPIC_ARGS=()
for t in "${TOPICS[@]}"; do TOPIC_ARGS+=(--topic "$t:12"); done

# The cluster runs while its stdin is open: a FIFO held by this shell.
FIFO=$OUT/cluster.stdin
rm -f "$FIFO"
mkfifo "$FIFO"
target/debug/kafka_cluster --nodes 1 "${TOPIC_ARGS[@]}" <"$FIFO" >"$OUT/cluster.out" \
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
echo "cluster at $BOOTSTRAP; input $INPUT ($LINES lines)" >&2

# Runs "$@" under /usr/bin/time; prints "MAXRSS_KB SECONDS".
measure() {
    local name=$1
    shift
    /usr/bin/time -o "$OUT/$name.time" -f '%M %e' "$@" >"$OUT/$name.out" 2>"$OUT/$name.err" || {
        echo "$name failed:" >&2
        tail -5 "$OUT/$name.err" >&2
        exit 1
    }
    tail -1 "$OUT/$name.time"
}

row() { printf '| %s | %s | %.1f | %s |\n' "$1" "$2" "$(echo "$3" | awk '{print $1 / 1024}')" \
    "$(echo "$3" | awk '{print $2}')"; }

echo "| producer | buffer | peak RSS MiB | seconds |"
echo "|---|---|---|---|"
for b in $BUFFERS; do
    r=$(measure "kafka-produce-$b" target/release/kafka-produce -q -b "$BOOTSTRAP" -t "kp$b" -K : \
        -X "buffer.memory=$((b << 20))" --failed "$OUT/kafka-produce-$b.failed" "$INPUT")
    grep -q "read $LINES records: delivered $LINES, failed 0" "$OUT/kafka-produce-$b.err" || {
        echo "kafka-produce at $b MiB did not deliver every line:" >&2
        cat "$OUT/kafka-produce-$b.err" >&2
        exit 1
    }
    row "kafka-produce" "buffer.memory $b MiB" "$r"
done
for b in default $BUFFERS; do
    queue=()
    [ "$b" = default ] || queue=(-X "queue.buffering.max.kbytes=$((b << 10))")
    r=$(measure "kcat-$b" kcat -P -q -b "$BOOTSTRAP" -t "kcat$b" -K : "${queue[@]}" -l "$INPUT")
    # kcat says nothing of what it delivered: count what the topic holds.
    n=$(kcat -C -q -b "$BOOTSTRAP" -t "kcat$b" -o beginning -e | wc -l)
    [ "$n" = "$LINES" ] || { echo "kcat at $b delivered $n of $LINES lines" >&2; exit 1; }
    row "kcat" "$([ "$b" = default ] && echo "its defaults" || echo "queue $b MiB")" "$r"
done
