// Java peer of bench_e2e (examples/examples/bench_e2e/): Apache Kafka's KafkaProducer
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
//
// Scale axes (bench_e2e --scale): --topics N spreads record i over N topics (TOPIC-0 ..
// TOPIC-(N-1), record i to TOPIC-(i mod N); one topic: --topic itself); --instances N runs N
// KafkaProducers in this process, each sending its share of the records from its own thread
// (not with --rate); --max-request-size N raises max.request.size (the 1 MB records). With
// --defaults true the producer keeps its shipped defaults (batch.size, linger.ms,
// buffer.memory, max.in.flight) instead of the bench's equal settings; acks, idempotence and
// compression stay the row's.
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
        int topicCount = Integer.parseInt(a.getOrDefault("--topics", "1"));
        String[] topics = new String[topicCount];
        for (int j = 0; j < topicCount; j++) {
            topics[j] = topicCount == 1 ? topic : topic + "-" + j;
        }
        int instances = Integer.parseInt(a.getOrDefault("--instances", "1"));
        boolean defaults = Boolean.parseBoolean(a.getOrDefault("--defaults", "false"));
        long records = Long.parseLong(a.get("--records"));
        long warmup = Long.parseLong(a.getOrDefault("--warmup", "100000"));
        int valueBytes = Integer.parseInt(a.getOrDefault("--value-bytes", "100"));
        double rate = Double.parseDouble(a.getOrDefault("--rate", "0"));
        byte[] values = Files.readAllBytes(Paths.get(a.get("--values")));
        byte[] keys = a.containsKey("--keys") ? Files.readAllBytes(Paths.get(a.get("--keys"))) : null;

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("--bootstrap"));
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        if (!defaults) {
            p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            p.put(ProducerConfig.BATCH_SIZE_CONFIG, a.getOrDefault("--batch-size", "16384"));
            p.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, "5");
            p.put(ProducerConfig.BUFFER_MEMORY_CONFIG, Long.toString(64L << 20));
        }
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, a.getOrDefault("--idempotence", "false"));
        if (a.containsKey("--max-request-size")) {
            p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, a.get("--max-request-size"));
        }
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
        if (instances > 1) {
            if (rate > 0) {
                System.err.println("java: --instances takes no --rate");
                System.exit(2);
            }
            runInstances(p, instances, topics, records, warmup, values, keys, valueBytes, os);
            return;
        }
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            // A client that cannot talk to the cluster says so (after max.block.ms) instead of
            // blocking every send.
            try {
                producer.partitionsFor(topics[0]);
            } catch (Exception e) {
                System.err.println("java: cannot connect: " + e);
                System.exit(1);
            }
            send(producer, topics, 0, warmup, values, keys, valueBytes, (m, e) -> { });
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
                    send(producer, topics, i, i + 1, values, keys, valueBytes, timed);
                }
            } else {
                send(producer, topics, 0, records, values, keys, valueBytes, counting);
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

    /**
     * --instances N: N producers, each warmed up with its share of the warm-up, then timed
     * together (one clock, the process's CPU) while each sends its share from its own thread.
     */
    static void runInstances(Properties p, int n, String[] topics, long records, long warmup,
                             byte[] values, byte[] keys, int valueBytes,
                             com.sun.management.OperatingSystemMXBean os) throws Exception {
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        Callback counting = (metadata, e) -> {
            if (e == null) {
                ok.incrementAndGet();
            } else if (failed.incrementAndGet() <= 3) {
                System.err.println("java: delivery failed: " + e);
            }
        };
        java.util.List<KafkaProducer<byte[], byte[]>> producers = new java.util.ArrayList<>();
        try {
            for (int k = 0; k < n; k++) {
                KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
                producers.add(producer);
                try {
                    producer.partitionsFor(topics[0]);
                } catch (Exception e) {
                    System.err.println("java: cannot connect: " + e);
                    System.exit(1);
                }
                send(producer, topics, 0, warmup / n, values, keys, valueBytes, (m, e) -> { });
                producer.flush();
            }
            long cpu0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            Thread[] senders = new Thread[n];
            for (int k = 0; k < n; k++) {
                final KafkaProducer<byte[], byte[]> producer = producers.get(k);
                final long from = records * k / n;
                final long to = records * (k + 1) / n;
                senders[k] = new Thread(() -> {
                    send(producer, topics, from, to, values, keys, valueBytes, counting);
                    producer.flush();
                });
                senders[k].start();
            }
            for (Thread s : senders) {
                s.join();
            }
            while (ok.get() + failed.get() < records) {
                Thread.sleep(1);
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            double cpu = (os.getProcessCpuTime() - cpu0) / 1e9;
            System.out.printf("RESULT ok=%d failed=%d secs=%.6f cpu=%.6f%n",
                ok.get(), failed.get(), secs, cpu);
            System.out.flush();
        } finally {
            for (KafkaProducer<byte[], byte[]> producer : producers) {
                producer.close();
            }
        }
    }

    static void send(KafkaProducer<byte[], byte[]> producer, String[] topics, long from, long to,
                     byte[] values, byte[] keys, int valueBytes, Callback cb) {
        for (long i = from; i < to; i++) {
            int start = (int) ((i * 7919L) % VALUE_ARENA);
            byte[] value = Arrays.copyOfRange(values, start, start + valueBytes);
            byte[] key = null;
            if (keys != null) {
                int k = (int) (i % KEYS) * 8;
                key = Arrays.copyOfRange(keys, k, k + 8);
            }
            producer.send(new ProducerRecord<>(topics[(int) (i % topics.length)], key, value), cb);
        }
    }
}
