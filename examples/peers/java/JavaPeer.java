// Java peer of bench_e2e (examples/examples/bench_e2e.rs): Apache Kafka's KafkaProducer
// (kafka-clients from the test tier's distribution), one send(record, callback) per record.
// A warm-up of --warmup records (sent and flushed, not counted) comes first so the JIT has
// compiled the hot path; then the clock starts and --records records are timed up to their
// last callback. Prints "RESULT ok=N failed=N secs=S cpu=C" where cpu is the process's CPU
// time (all threads, from OperatingSystemMXBean.getProcessCpuTime) during the timed phase
// only. The coordinator measures peak RSS of the whole process itself (wait4).
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

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
            send(producer, topic, 0, records, values, keys, valueBytes, counting);
            producer.flush();
            while (ok.get() + failed.get() < records) {
                Thread.sleep(1);
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            double cpu = (os.getProcessCpuTime() - cpu0) / 1e9;
            System.out.printf("RESULT ok=%d failed=%d secs=%.6f cpu=%.6f%n",
                ok.get(), failed.get(), secs, cpu);
            System.out.flush();
        }
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
