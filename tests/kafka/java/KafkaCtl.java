// The real-Kafka test tier's admin and read-back program (driven by tests/src/kafka/ctl.rs).
//
// One JVM per cluster, started once: it reads one command per line on stdin and answers each
// with exactly one line on stdout, so an admin call costs a round trip to the brokers, not a JVM
// start. Every answer starts with "ok" or "err"; "consume" first prints one "rec" line per
// record. Tokens are separated by single spaces; bytes travel as lowercase hex ("-" for null).
//
//   create TOPIC PARTITIONS RF [KEY=VALUE ...]     create a topic with topic configs
//   alter TOPIC KEY=VALUE ...                      set topic configs (KEY= deletes the setting)
//   delete TOPIC                                   delete a topic, wait until it is gone
//   describe TOPIC                                 ok P/LEADER/R1,R2,../ISR1,.. for each partition
//   move TOPIC PARTITION BROKER                    make BROKER the preferred replica (reassign
//                                                  with BROKER first) and elect it leader
//   consume TOPIC PARTITIONS                       read every partition from its start to its
//                                                  end offset (taken first) with the Java
//                                                  consumer: rec P OFFSET TIMESTAMP TYPE KEY VALUE
//                                                  HEADERS(K=V,..|-), then ok COUNT
//   client-metrics NAME KEY=VALUE ...              set a KIP-714 client-metrics subscription's
//                                                  configs (metrics, interval.ms, match; KEY=
//                                                  deletes the setting, all deleted: no
//                                                  subscription)
//   produce TOPIC RECORDS MILLIS [KEY=VALUE ...]   Java's producer (producer configs KEY=VALUE)
//                                                  sends RECORDS records spread over MILLIS ms,
//                                                  then closes (no flush first: KIP-714, the
//                                                  close pushes its terminating metrics): ok
//                                                  INSTANCE_ID|- ACKED FAILED
//   quit
//
// Built by tests/src/kafka/dist.rs with javac against the kafka-clients jar in the Maven cache.

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KafkaCtl {
    private static final long TIMEOUT_MS = 30_000;

    private final String bootstrap;
    private final Admin admin;
    private final BufferedWriter out;

    private KafkaCtl(String bootstrap, BufferedWriter out) {
        this.bootstrap = bootstrap;
        this.out = out;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "50");
        this.admin = Admin.create(p);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: KafkaCtl BOOTSTRAP");
            System.exit(2);
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        KafkaCtl ctl = new KafkaCtl(args[0], out);
        out.write("ready\n");
        out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] t = line.trim().split(" ");
            if (t[0].equals("quit")) {
                break;
            }
            String answer;
            try {
                answer = ctl.run(t);
            } catch (ExecutionException e) {
                answer = "err " + oneLine(e.getCause());
            } catch (Exception e) {
                answer = "err " + oneLine(e);
            }
            out.write(answer);
            out.write('\n');
            out.flush();
        }
        ctl.admin.close(Duration.ofSeconds(5));
    }

    private static String oneLine(Throwable e) {
        return (e.getClass().getSimpleName() + ": " + e.getMessage()).replace('\n', ' ');
    }

    private String run(String[] t) throws Exception {
        switch (t[0]) {
            case "create": return create(t);
            case "alter": return alter(t);
            case "grow": return grow(t[1], Integer.parseInt(t[2]));
            case "delete": return delete(t[1]);
            case "describe": return "ok " + describe(t[1]);
            case "move": return move(t[1], Integer.parseInt(t[2]), Integer.parseInt(t[3]));
            case "consume": return consume(t[1], Integer.parseInt(t[2]));
            case "deny-write": return denyWrite(t[1], t[2]);
            case "client-metrics": return clientMetrics(t);
            case "produce": return produce(t);
            default: return "err unknown command " + t[0];
        }
    }

    private static Map<String, String> configs(String[] t, int from) {
        Map<String, String> m = new HashMap<>();
        for (int i = from; i < t.length; i++) {
            int eq = t[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("expected KEY=VALUE, got " + t[i]);
            }
            m.put(t[i].substring(0, eq), t[i].substring(eq + 1));
        }
        return m;
    }

    private String create(String[] t) throws Exception {
        NewTopic nt = new NewTopic(t[1], Integer.parseInt(t[2]), Short.parseShort(t[3]))
            .configs(configs(t, 4));
        admin.createTopics(List.of(nt)).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        return "ok";
    }

    /** Raises topic t[1]'s partition count to t[2] (CreatePartitions). */
    private String grow(String topic, int total) throws Exception {
        admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(total)))
            .all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        return "ok";
    }

    private String alter(String[] t) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, t[1]);
        List<AlterConfigOp> ops = new ArrayList<>();
        for (Map.Entry<String, String> e : configs(t, 2).entrySet()) {
            if (e.getValue().isEmpty()) {
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), null), AlterConfigOp.OpType.DELETE));
            } else {
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
            }
        }
        admin.incrementalAlterConfigs(Map.of(r, ops)).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        return "ok";
    }

    /** Sets (KEY=VALUE) or deletes (KEY=) the configs of client-metrics subscription t[1]
     * (KIP-714; what kafka-client-metrics.sh --alter does). */
    private String clientMetrics(String[] t) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.CLIENT_METRICS, t[1]);
        List<AlterConfigOp> ops = new ArrayList<>();
        for (Map.Entry<String, String> e : configs(t, 2).entrySet()) {
            if (e.getValue().isEmpty()) {
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), null), AlterConfigOp.OpType.DELETE));
            } else {
                ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
            }
        }
        admin.incrementalAlterConfigs(Map.of(r, ops)).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        return "ok";
    }

    /** Java's producer: t[2] records to topic t[1], spread evenly over t[3] ms, with the
     * producer configs t[4..] (KEY=VALUE); flushed and closed. Answers the producer's KIP-714
     * client instance id ("-" when it has none: enable.metrics.push=false, or the broker
     * offers no telemetry), the records acknowledged and the records failed. */
    private String produce(String[] t) throws Exception {
        String topic = t[1];
        int records = Integer.parseInt(t[2]);
        long millis = Long.parseLong(t[3]);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.putAll(configs(t, 4));
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        String instance = "-";
        long start = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (int i = 0; i < records; i++) {
                long due = start + (records <= 1 ? 0 : millis * 1_000_000L * i / (records - 1));
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
                byte[] key = String.format("k%05d", i).getBytes(StandardCharsets.UTF_8);
                byte[] value = String.format("v%05d", i).getBytes(StandardCharsets.UTF_8);
                producer.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
                    if (e == null) {
                        acked.incrementAndGet();
                    } else {
                        failed.incrementAndGet();
                    }
                });
                if (i == 0) {
                    try {
                        instance = producer.clientInstanceId(Duration.ofSeconds(10)).toString();
                    } catch (IllegalStateException | KafkaException e) {
                        instance = "-";
                    }
                }
            }
            // No flush: close() delivers what is left. A producer that has nothing left to send
            // when it closes does not poll again, and Java's terminating push (queued by close)
            // never leaves; one that is still sending carries it out with its last requests.
        }
        return "ok " + instance + " " + acked.get() + " " + failed.get();
    }

    /** Denies `principal` (e.g. User:ANONYMOUS) WRITE on `topic`, from any host, and waits
     * until the ACL is listed. Everything else stays allowed: once a topic has an ACL,
     * allow.everyone.if.no.acl.found no longer applies to it, so an ALLOW of every operation
     * comes with the DENY (which takes precedence for WRITE). */
    private String denyWrite(String topic, String principal) throws Exception {
        ResourcePattern resource = new ResourcePattern(ResourceType.TOPIC, topic, PatternType.LITERAL);
        AclBinding allow = new AclBinding(resource,
            new AccessControlEntry(principal, "*", AclOperation.ALL, AclPermissionType.ALLOW));
        AclBinding deny = new AclBinding(resource,
            new AccessControlEntry(principal, "*", AclOperation.WRITE, AclPermissionType.DENY));
        admin.createAcls(List.of(allow, deny)).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            if (admin.describeAcls(deny.toFilter()).values().get().contains(deny)) {
                return "ok";
            }
            Thread.sleep(50);
        }
        return "err the ACL was not listed " + TIMEOUT_MS + " ms after its creation";
    }

    private String delete(String topic) throws Exception {
        admin.deleteTopics(List.of(topic)).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            if (!admin.listTopics().names().get().contains(topic)) {
                return "ok";
            }
            Thread.sleep(50);
        }
        return "err topic " + topic + " still listed " + TIMEOUT_MS + " ms after its deletion";
    }

    private TopicDescription description(String topic) throws Exception {
        return admin.describeTopics(List.of(topic)).allTopicNames()
            .get(TIMEOUT_MS, TimeUnit.MILLISECONDS).get(topic);
    }

    private String describe(String topic) throws Exception {
        StringBuilder sb = new StringBuilder();
        for (TopicPartitionInfo p : description(topic).partitions()) {
            if (sb.length() > 0) {
                sb.append(' ');
            }
            sb.append(p.partition()).append('/')
                .append(p.leader() == null ? -1 : p.leader().id()).append('/')
                .append(p.replicas().stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining(","))).append('/')
                .append(p.isr().stream().map(n -> Integer.toString(n.id())).collect(Collectors.joining(",")));
        }
        return sb.toString();
    }

    private String move(String topic, int partition, int broker) throws Exception {
        TopicPartition tp = new TopicPartition(topic, partition);
        TopicPartitionInfo info = description(topic).partitions().get(partition);
        List<Integer> replicas = new ArrayList<>();
        replicas.add(broker);
        for (Node n : info.replicas()) {
            if (n.id() != broker) {
                replicas.add(n.id());
            }
        }
        if (info.replicas().get(0).id() != broker) {
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(replicas))))
                .all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            // Reordering the same replicas moves no data: the reassignment ends at once; wait
            // until the controller lists it no more.
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (admin.listPartitionReassignments(Set.of(tp)).reassignments().get().containsKey(tp)) {
                if (System.currentTimeMillis() > deadline) {
                    return "err reassignment of " + tp + " still running";
                }
                Thread.sleep(20);
            }
        }
        try {
            Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(ElectionType.PREFERRED, Set.of(tp))
                .partitions().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
            Optional<Throwable> e = r.get(tp);
            if (e != null && e.isPresent() && !(e.get() instanceof ElectionNotNeededException)) {
                return "err election: " + oneLine(e.get());
            }
        } catch (ExecutionException e) {
            if (!(e.getCause() instanceof ElectionNotNeededException)) {
                throw e;
            }
        }
        Node leader = description(topic).partitions().get(partition).leader();
        return "ok " + (leader == null ? -1 : leader.id());
    }

    private static void hex(StringBuilder sb, byte[] b) {
        if (b == null) {
            sb.append('-');
            return;
        }
        if (b.length == 0) {
            sb.append('_');
            return;
        }
        for (byte x : b) {
            sb.append(Character.forDigit((x >> 4) & 0xf, 16)).append(Character.forDigit(x & 0xf, 16));
        }
    }

    private String consume(String topic, int partitions) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.CHECK_CRCS_CONFIG, "true");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "5000");
        long count = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(TIMEOUT_MS));
            Set<TopicPartition> todo = new HashSet<>();
            for (TopicPartition tp : tps) {
                if (c.position(tp, Duration.ofMillis(TIMEOUT_MS)) < end.get(tp)) {
                    todo.add(tp);
                }
            }
            long deadline = System.currentTimeMillis() + 4 * TIMEOUT_MS;
            StringBuilder sb = new StringBuilder(256);
            while (!todo.isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    return "err consume: partitions not read to their end: " + todo;
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    sb.setLength(0);
                    sb.append("rec ").append(r.partition()).append(' ').append(r.offset()).append(' ')
                        .append(r.timestamp()).append(' ').append(r.timestampType().id).append(' ');
                    hex(sb, r.key());
                    sb.append(' ');
                    hex(sb, r.value());
                    sb.append(' ');
                    Header[] hs = r.headers().toArray();
                    if (hs.length == 0) {
                        sb.append('-');
                    }
                    for (int i = 0; i < hs.length; i++) {
                        if (i > 0) {
                            sb.append(',');
                        }
                        hex(sb, hs[i].key().getBytes(StandardCharsets.UTF_8));
                        sb.append('=');
                        hex(sb, hs[i].value());
                    }
                    sb.append('\n');
                    out.write(sb.toString());
                    count++;
                }
                for (TopicPartition tp : new ArrayList<>(todo)) {
                    if (c.position(tp) >= end.get(tp)) {
                        todo.remove(tp);
                    }
                }
            }
        }
        return "ok " + count;
    }
}
