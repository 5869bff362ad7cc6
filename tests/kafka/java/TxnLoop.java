// Java's transactional producer in the loop of the rolling-fault test (issue 27,
// tests/tests/kafka_txn_rolling.rs): the same records, the same transactions, the same
// handling of each call's outcome as our producer's loop there. Driven by
// tests/src/kafka/rolling.rs; compiled with KafkaCtl by tests/src/kafka/dist.rs.
//
//   TxnLoop BOOTSTRAP TOPIC TRANSACTIONAL_ID TRANSACTIONS RECORDS KEYS ABORT_EVERY
//           MAX_BLOCK_MS DELIVERY_TIMEOUT_MS REQUEST_TIMEOUT_MS TRANSACTION_TIMEOUT_MS RATE
//
// RATE: records per second at most, open loop (0: as fast as it goes).
// Record i of transaction t: key "k%03d" (i % KEYS), value "%06d:%05d" (t, i). Every
// ABORT_EVERY-th transaction (t % ABORT_EVERY == ABORT_EVERY - 1) is aborted on purpose; a
// commit that fails with an abortable error is aborted; a fatal error (fenced, out of order)
// closes the producer and a new one takes over. A call that throws TimeoutException
// (max.block.ms) is called again. Prints one line per blocking call and per transaction:
//
//   CALL OPERATION MILLIS ok|timeout|error:CLASS
//   TXN T Committed|Aborted|Failed|InDoubt
//   ONWIRE N   (transactions aborted on purpose with their records on the wire first)
//   DONE STARTS
//
// A transaction aborted on purpose is aborted once its records are on the wire (the metric
// record-send-total has grown by RECORDS), or after MAX_BLOCK_MS, as the Rust loop does.

import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnLoop {
    private static final AtomicLong FAILED_REPORTS = new AtomicLong();

    /** A fatal error: the producer must be closed. */
    private static boolean fatal(Throwable e) {
        return e instanceof ProducerFencedException
            || e instanceof OutOfOrderSequenceException
            || e instanceof AuthorizationException
            || e instanceof UnsupportedVersionException;
    }

    /** Runs a blocking call until it does not time out; prints each attempt. */
    private static void call(String op, Callable<Void> c) throws Exception {
        while (true) {
            long start = System.nanoTime();
            try {
                c.call();
                line("CALL " + op + " " + millis(start) + " ok");
                return;
            } catch (TimeoutException e) {
                line("CALL " + op + " " + millis(start) + " timeout");
            } catch (Exception e) {
                line("CALL " + op + " " + millis(start) + " error:" + e.getClass().getSimpleName());
                System.err.println("TxnLoop: " + op + " failed: " + e);
                throw e;
            }
        }
    }

    /** Records the producer has put in Produce requests so far (record-send-total). */
    private static double recordsSent(KafkaProducer<?, ?> producer) {
        for (Map.Entry<MetricName, ? extends Metric> e : producer.metrics().entrySet()) {
            MetricName n = e.getKey();
            if (n.name().equals("record-send-total") && n.group().equals("producer-metrics")) {
                return ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return 0;
    }

    /** Waits until record-send-total reaches target, for at most maxBlockMs; whether it did. */
    private static boolean onTheWire(KafkaProducer<?, ?> producer, double target, long maxBlockMs)
            throws InterruptedException {
        long until = System.nanoTime() + maxBlockMs * 1_000_000L;
        while (recordsSent(producer) < target) {
            if (System.nanoTime() >= until) {
                return false;
            }
            Thread.sleep(2);
        }
        return true;
    }

    private static long millis(long start) {
        return (System.nanoTime() - start) / 1_000_000;
    }

    private static synchronized void line(String s) {
        System.out.println(s);
        System.out.flush();
    }

    private static KafkaProducer<byte[], byte[]> start(Properties p) throws Exception {
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        call("init_transactions", () -> { producer.initTransactions(); return null; });
        return producer;
    }

    public static void main(String[] a) throws Exception {
        String bootstrap = a[0];
        String topic = a[1];
        String id = a[2];
        int transactions = Integer.parseInt(a[3]);
        int records = Integer.parseInt(a[4]);
        int keys = Integer.parseInt(a[5]);
        int abortEvery = Integer.parseInt(a[6]);
        long rate = Long.parseLong(a[11]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, id);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, a[7]);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, a[8]);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, a[9]);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, a[10]);
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.RETRY_BACKOFF_MS_CONFIG, "20");
        p.put(ProducerConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MS_CONFIG, "20");
        p.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = start(p);
        int starts = 1;
        long pacedFrom = System.nanoTime();
        long sent = 0;
        long maxBlockMs = Long.parseLong(a[7]);
        int abortedOnTheWire = 0;
        for (int t = 0; t < transactions; t++) {
            producer.beginTransaction();
            double sentBefore = recordsSent(producer);
            for (int i = 0; i < records; i++) {
                if (rate > 0) {
                    long due = pacedFrom + sent * 1_000_000_000L / rate;
                    long wait = due - System.nanoTime();
                    if (wait > 0) {
                        Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                    }
                    sent++;
                }
                byte[] key = String.format("k%03d", i % keys).getBytes();
                byte[] value = String.format("%06d:%05d", t, i).getBytes();
                producer.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
                    if (e != null) {
                        FAILED_REPORTS.incrementAndGet();
                    }
                });
            }
            String outcome;
            final KafkaProducer<byte[], byte[]> pr = producer;
            boolean abort = t % abortEvery == abortEvery - 1;
            if (abort) {
                if (onTheWire(producer, sentBefore + records, maxBlockMs)) {
                    abortedOnTheWire++;
                }
                outcome = "Aborted";
            } else {
                try {
                    call("commit_transaction", () -> { pr.commitTransaction(); return null; });
                    outcome = "Committed";
                } catch (Exception e) {
                    outcome = fatal(e) ? "InDoubt" : "Failed";
                }
            }
            if (outcome.equals("Aborted") || outcome.equals("Failed")) {
                try {
                    call("abort_transaction", () -> { pr.abortTransaction(); return null; });
                } catch (Exception e) {
                    if (!fatal(e) && !(e instanceof KafkaException)) {
                        throw e;
                    }
                    outcome = "InDoubt";
                }
            }
            line("TXN " + t + " " + outcome);
            if (outcome.equals("InDoubt")) {
                producer.close();
                producer = start(p);
                starts++;
            }
        }
        producer.close();
        line("ONWIRE " + abortedOnTheWire);
        line("DONE " + starts);
    }
}
