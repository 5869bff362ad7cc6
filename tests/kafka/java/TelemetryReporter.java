// The real-Kafka test tier's KIP-714 receiver (issue 23, item 4): a broker metrics reporter
// that implements ClientTelemetry, so that a broker lists GetTelemetrySubscriptions (71) and
// PushTelemetry (72) in ApiVersions and hands every accepted push to it. Kafka 4.1 ships no such
// reporter. Configured by tests/src/kafka/cluster.rs (ClusterSpec::telemetry_reporter):
//
//   metric.reporters=TelemetryReporter
//   telemetry.reporter.file=/path/to/file      (required)
//
// Each push the broker accepted becomes one line appended to that file (parsed by
// tests/src/kafka/telemetry.rs). Tokens are separated by single spaces; every value is
// percent-encoded (UTF-8 bytes outside A-Z a-z 0-9 . _ - : / * @ as %XX):
//
//   push seq=N instance=UUID terminating=true|false content_type=CT version=V client_id=ID
//        principal=P listener=L bytes=N decode=ok|REASON resource=K=V,K=V
//        point=NAME|TYPE|TEMPORALITY|MONOTONIC|VALUE|START_NS|TIME_NS|K=V,K=V ...
//        payload=HEX
//
// bytes and payload are the metrics as the broker hands them over (decompressed: the
// compression the client chose is not part of ClientTelemetryPayload). The payload is decoded
// as OTLP MetricsData with the OpenTelemetry protobuf classes kafka-clients carries shaded
// (org.apache.kafka.shaded.io.opentelemetry.proto): one point token per data point, TYPE gauge
// or sum (histogram, summary and others are named with no value), TEMPORALITY delta, cumulative
// or - (gauges), MONOTONIC 1 or 0, VALUE the number as Java prints it. When decoding fails,
// decode names why and no point follows (the payload is still there).
//
// ClientTelemetry and ClientTelemetryReceiver are deprecated in Kafka 4.2 in favour of
// ClientTelemetryExporterProvider (KIP-1159): when the pinned Kafka moves past 4.1, this class
// implements that instead.
//
// In a combined (broker + controller) node the reporter may be instantiated more than once;
// the lines of every instance go through one lock, each written whole.

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.AnyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

public final class TelemetryReporter implements MetricsReporter, ClientTelemetry {
    /** The broker setting naming the file the pushes go to. */
    public static final String FILE_CONFIG = "telemetry.reporter.file";

    private static final Object LOCK = new Object();
    private static long seq = 0;

    private volatile Path file;

    @Override
    public void configure(Map<String, ?> configs) {
        Object f = configs.get(FILE_CONFIG);
        if (f == null || f.toString().isEmpty()) {
            throw new IllegalArgumentException("TelemetryReporter needs " + FILE_CONFIG);
        }
        file = Paths.get(f.toString());
    }

    @Override
    public void init(List<KafkaMetric> metrics) {
    }

    @Override
    public void metricChange(KafkaMetric metric) {
    }

    @Override
    public void metricRemoval(KafkaMetric metric) {
    }

    @Override
    public void close() {
    }

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return this::record;
    }

    private void record(AuthorizableRequestContext context, ClientTelemetryPayload payload) {
        ByteBuffer data = payload.data();
        byte[] bytes = new byte[data == null ? 0 : data.remaining()];
        if (data != null) {
            data.duplicate().get(bytes);
        }
        StringBuilder sb = new StringBuilder(256 + bytes.length * 3);
        sb.append("push seq=");
        int at = sb.length();
        sb.append(" instance=").append(payload.clientInstanceId());
        sb.append(" terminating=").append(payload.isTerminating());
        sb.append(" content_type=");
        enc(sb, payload.contentType());
        sb.append(" version=").append(context.requestVersion());
        sb.append(" client_id=");
        enc(sb, context.clientId());
        sb.append(" principal=");
        enc(sb, String.valueOf(context.principal()));
        sb.append(" listener=");
        enc(sb, context.listenerName());
        sb.append(" bytes=").append(bytes.length);
        StringBuilder decoded = new StringBuilder();
        String decode;
        try {
            decode(decoded, MetricsData.parseFrom(bytes));
            decode = "ok";
        } catch (Exception | LinkageError e) {
            decoded.setLength(0);
            decode = e.getClass().getSimpleName() + ": " + e.getMessage();
        }
        sb.append(" decode=");
        enc(sb, decode);
        sb.append(decoded);
        sb.append(" payload=");
        for (byte b : bytes) {
            sb.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        sb.append('\n');
        synchronized (LOCK) {
            sb.insert(at, ++seq);
            try {
                Files.write(file, sb.toString().getBytes(StandardCharsets.UTF_8),
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND, StandardOpenOption.WRITE);
            } catch (IOException e) {
                // The broker answers the push with an error and logs this.
                throw new RuntimeException("TelemetryReporter: write " + file + ": " + e, e);
            }
        }
    }

    private static void decode(StringBuilder sb, MetricsData md) {
        sb.append(" resource=");
        boolean first = true;
        for (ResourceMetrics rm : md.getResourceMetricsList()) {
            for (KeyValue kv : rm.getResource().getAttributesList()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                attr(sb, kv);
            }
        }
        for (ResourceMetrics rm : md.getResourceMetricsList()) {
            for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                for (Metric m : sm.getMetricsList()) {
                    switch (m.getDataCase()) {
                        case GAUGE:
                            for (NumberDataPoint p : m.getGauge().getDataPointsList()) {
                                point(sb, m.getName(), "gauge", "-", false, p);
                            }
                            break;
                        case SUM:
                            String temporality;
                            switch (m.getSum().getAggregationTemporality()) {
                                case AGGREGATION_TEMPORALITY_DELTA: temporality = "delta"; break;
                                case AGGREGATION_TEMPORALITY_CUMULATIVE: temporality = "cumulative"; break;
                                default: temporality = "unspecified"; break;
                            }
                            for (NumberDataPoint p : m.getSum().getDataPointsList()) {
                                point(sb, m.getName(), "sum", temporality, m.getSum().getIsMonotonic(), p);
                            }
                            break;
                        default:
                            sb.append(" point=");
                            enc(sb, m.getName());
                            sb.append('|');
                            enc(sb, m.getDataCase().name().toLowerCase());
                            sb.append("|-|0|NaN|0|0|");
                            break;
                    }
                }
            }
        }
    }

    private static void point(StringBuilder sb, String name, String type, String temporality, boolean monotonic,
                              NumberDataPoint p) {
        sb.append(" point=");
        enc(sb, name);
        sb.append('|').append(type).append('|').append(temporality).append('|').append(monotonic ? '1' : '0').append('|');
        switch (p.getValueCase()) {
            case AS_DOUBLE: sb.append(p.getAsDouble()); break;
            case AS_INT: sb.append(p.getAsInt()); break;
            default: sb.append("NaN"); break;
        }
        sb.append('|').append(p.getStartTimeUnixNano()).append('|').append(p.getTimeUnixNano()).append('|');
        boolean first = true;
        for (KeyValue kv : p.getAttributesList()) {
            if (!first) {
                sb.append(',');
            }
            first = false;
            attr(sb, kv);
        }
    }

    private static void attr(StringBuilder sb, KeyValue kv) {
        enc(sb, kv.getKey());
        sb.append('=');
        AnyValue v = kv.getValue();
        switch (v.getValueCase()) {
            case STRING_VALUE: enc(sb, v.getStringValue()); break;
            case BOOL_VALUE: sb.append(v.getBoolValue()); break;
            case INT_VALUE: sb.append(v.getIntValue()); break;
            case DOUBLE_VALUE: sb.append(v.getDoubleValue()); break;
            default: enc(sb, v.toString().trim()); break;
        }
    }

    /** Percent-encodes s (null: the empty string) into sb. */
    private static void enc(StringBuilder sb, String s) {
        if (s == null) {
            return;
        }
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            char c = (char) (b & 0xff);
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '*' || c == '@') {
                sb.append(c);
            } else {
                sb.append('%').append(Character.toUpperCase(Character.forDigit((b >> 4) & 0xf, 16)))
                    .append(Character.toUpperCase(Character.forDigit(b & 0xf, 16)));
            }
        }
    }
}
