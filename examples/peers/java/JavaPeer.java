// Java peer of bench_e2e (examples/examples/bench_e2e.rs): Apache Kafka's KafkaProducer
// (kafka-clients from the test tier's distribution), one send(record, callback) per record.
// A warm-up of --warmup records (sent and flushed, not counted) comes first so the JIT has
// compiled the hot path; then the clock starts and --records records are timed up to their
// last callback. Prints "RESULT ok=N failed=N secs=S cpu=C" where cpu is the process's CPU
// time (all threads, from OperatingSystemMXBean.getProcessCpuTime) during the timed phase
// only. The coordinator measures peak RSS of the whole process itself (wait4).
//
// With --rate N (the latency workload) the timed phase is open loop: record i is due at
// start + i/N; the sender sends every due record (catching up when it fell behind) and the
// Callback of record i takes its latency, from when it was due to the callback; the RESULT
// line adds p50_us, p99_us and p999_us.
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class JavaPeer {
    static final int VALUE_ARENA = 1 << 20;
    static final int KEYS = 65536;

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            a.put(argv[i], argv[i + 1]);
        }
        String topic = a.getOrDefault("--topic", "bench");
        long records = Long.parseLong(a.get("--records"));
        long warmup = Long.parseLong(a.getOrDefault("--warmup", "100000"));
        int valueBytes = Integer.parseInt(a.getOrDefault("--value-bytes", "100"));
        double rate = Double.parseDouble(a.getOrDefault("--rate", "0"));
        byte[] values = Files.readAllBytes(Paths.get(a.get("--values")));
        byte[] keys = a.containsKey("--keys") ? Files.readAllBytes(Paths.get(a.get("--keys"))) : null;

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, a.getOrDefault("--batch-size", "16384"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, a.getOrDefault("--idempotence", "false"));
        p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
        p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, Long.toString(64L << 20));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.getOrDefault("--compression", "none"));
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        Callback counting = (metadata, e) -> {
            if (e == null) {
                ok.incrementAndGet();
            } else if (failed.incrementAndGet() <= 3) {
                System.err.println("java: delivery failed: " + e);
            }
        };
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            // A client that cannot talk to the cluster says so (after max.block.ms) instead of
            // blocking every send.
            try {
                producer.partitionsFor(topic);
            } catch (Exception e) {
                System.err.println("java: cannot connect: " + e);
                System.exit(1);
            }
            send(producer, topic, 0, warmup, values, keys, valueBytes, (m, e) -> { });
            producer.flush();
            long cpu0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            // Per record: 1 + its latency in µs once delivered, 0 if it failed (written by the
            // callbacks before they count, read after every record is counted).
            int[] latencies = rate > 0 ? new int[(int) records] : null;
            if (latencies != null) {
                double interval = 1e9 / rate;
                for (long i = 0; i < records; i++) {
                    long due = t0 + (long) (i * interval);
                    for (long wait; (wait = due - System.nanoTime()) > 0; ) {
                        LockSupport.parkNanos(wait);
                    }
                    final int slot = (int) i;
                    Callback timed = (m, e) -> {
                        if (e == null) {
                            long us = (System.nanoTime() - due) / 1000;
                            latencies[slot] = (int) Math.min(us, Integer.MAX_VALUE - 1) + 1;
                        }
                        counting.onCompletion(m, e);
                    };
                    send(producer, topic, i, i + 1, values, keys, valueBytes, timed);
                }
            } else {
                send(producer, topic, 0, records, values, keys, valueBytes, counting);
            }
            producer.flush();
            while (ok.get() + failed.get() < records) {
                Thread.sleep(1);
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            double cpu = (os.getProcessCpuTime() - cpu0) / 1e9;
            System.out.printf("RESULT ok=%d failed=%d secs=%.6f cpu=%.6f%s%n",
                ok.get(), failed.get(), secs, cpu, percentiles(latencies));
            System.out.flush();
        }
    }

    /** " p50_us=A p99_us=B p999_us=C" (nearest rank) over the delivered records, or "". */
    static String percentiles(int[] latencies) {
        if (latencies == null) {
            return "";
        }
        int[] v = Arrays.stream(latencies).filter(l -> l > 0).map(l -> l - 1).sorted().toArray();
        if (v.length == 0) {
            return "";
        }
        java.util.function.DoubleFunction<Integer> rank =
            q -> v[Math.max(1, Math.min((int) Math.ceil(q * v.length), v.length)) - 1];
        return String.format(" p50_us=%d p99_us=%d p999_us=%d",
            rank.apply(0.50), rank.apply(0.99), rank.apply(0.999));
    }

    static void send(KafkaProducer<byte[], byte[]> producer, String topic, long from, long to,
                     byte[] values, byte[] keys, int valueBytes, Callback cb) {
        for (long i = from; i < to; i++) {
            int start = (int) ((i * 7919L) % VALUE_ARENA);
            byte[] value = Arrays.copyOfRange(values, start, start + valueBytes);
            byte[] key = null;
            if (keys != null) {
                int k = (int) (i % KEYS) * 8;
                key = Arrays.copyOfRange(keys, k, k + 8);
            }
            producer.send(new ProducerRecord<>(topic, key, value), cb);
        }
    }
}
