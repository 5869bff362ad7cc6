//! Settings by Kafka's names: every spelling applied, the Java and librdkafka files, and the
//! errors that name what is wrong.

use super::*;

#[test]
fn every_setting_is_applied_by_every_spelling() {
    let values = |name: &str| match name {
        "bootstrap.servers" => "a:1",
        "acks" => "all",
        "enable.idempotence"
        | "partitioner.adaptive.partitioning.enable"
        | "partitioner.ignore.keys"
        | "enable.metrics.push" => "true",
        "compression.type" => "lz4",
        "security.protocol" => "SASL_SSL",
        "sasl.mechanism" => "SCRAM-SHA-512",
        "sasl.jaas.config" => {
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";"#
        }
        "ssl.endpoint.identification.algorithm" => "none",
        "metadata.recovery.strategy" => "none",
        "client.id" | "sasl.username" | "sasl.password" => "x",
        n if n.ends_with(".location") => "/tmp/x.pem",
        "max.in.flight.requests.per.connection" => "5",
        _ => "100",
    };
    for s in SETTINGS {
        for name in s.names {
            let v = values(s.names[0]);
            if let Err(e) = Config::builder([("h", 1)]).set(name, v) {
                panic!("{name}={v}: {e}");
            }
        }
    }
}

#[test]
fn metadata_recovery_by_name() {
    let c = Config::from_properties([
        ("bootstrap.servers", "k1:9092"),
        ("metadata.recovery.strategy", "NONE"),
        ("metadata.recovery.rebootstrap.trigger.ms", "2500"),
    ])
    .unwrap();
    assert_eq!(c.metadata_recovery, MetadataRecovery::None);
    assert_eq!(c.rebootstrap_trigger, Duration::from_millis(2500));
    let d = Config::from_properties([("bootstrap.servers", "k1:9092")]).unwrap();
    assert_eq!(d.metadata_recovery, MetadataRecovery::Rebootstrap);
    assert_eq!(d.rebootstrap_trigger, Duration::from_secs(300));
    let e = Config::builder([("h", 1)])
        .set("metadata.recovery.strategy", "sometimes")
        .unwrap_err()
        .to_string();
    assert!(e.contains("rebootstrap or none"), "{e}");
}

#[test]
fn metrics_windows_by_name() {
    let c = Config::from_properties([
        ("bootstrap.servers", "k1:9092"),
        ("metrics.sample.window.ms", "5000"),
        ("metrics.num.samples", "4"),
    ])
    .unwrap();
    assert_eq!(c.metrics_sample_window, Duration::from_secs(5));
    assert_eq!(c.metrics_num_samples, 4);
    let d = Config::from_properties([("bootstrap.servers", "k1:9092")]).unwrap();
    assert_eq!(
        d.metrics_sample_window,
        Duration::from_secs(30),
        "Java's default"
    );
    assert_eq!(d.metrics_num_samples, 2, "Java's default");
    for (name, v) in [
        ("metrics.num.samples", "0"),
        ("metrics.num.samples", "65"),
        ("metrics.sample.window.ms", "0"),
    ] {
        let e = Config::from_properties([("bootstrap.servers", "k1:9092"), (name, v)]);
        assert!(e.is_err(), "{name}={v} taken");
    }
}

#[test]
fn metadata_max_idle_by_name() {
    let c = Config::from_properties([
        ("bootstrap.servers", "k1:9092"),
        ("metadata.max.idle.ms", "60000"),
    ])
    .unwrap();
    assert_eq!(c.metadata_max_idle, Duration::from_secs(60));
    let d = Config::from_properties([("bootstrap.servers", "k1:9092")]).unwrap();
    assert_eq!(
        d.metadata_max_idle,
        Duration::from_secs(300),
        "Java's default"
    );
    assert!(Config::from_properties([
        ("bootstrap.servers", "k1:9092"),
        ("metadata.max.idle.ms", "0"),
    ])
    .is_err());
}

#[test]
fn java_and_librdkafka_spellings_mean_the_same() {
    let java = Config::from_properties([
        ("bootstrap.servers", "k1:9092,k2:9093"),
        ("linger.ms", "20"),
        ("max.request.size", "2000000"),
        ("delivery.timeout.ms", "60000"),
        ("compression.type", "zstd"),
        ("acks", "1"),
    ])
    .unwrap();
    let rdkafka = Config::from_properties([
        ("metadata.broker.list", "k1:9092,k2:9093"),
        ("queue.buffering.max.ms", "20"),
        ("message.max.bytes", "2000000"),
        ("message.timeout.ms", "60000"),
        ("compression.codec", "zstd"),
        ("request.required.acks", "1"),
    ])
    .unwrap();
    assert_eq!(format!("{java:?}"), format!("{rdkafka:?}"));
    assert_eq!(
        java.bootstrap,
        [("k1".to_string(), 9092), ("k2".to_string(), 9093)]
    );
    assert_eq!(java.linger, Duration::from_millis(20));
    assert!(!java.idempotence, "acks=1 turns idempotence off");
}

#[test]
fn a_java_sasl_ssl_file_with_jaas() {
    let c = Config::from_properties_text(
        "# a producer.properties as Java users write it\n\
         bootstrap.servers=broker:9094\n\
         security.protocol=SASL_SSL\n\
         sasl.mechanism=SCRAM-SHA-256\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" password=\"s3cret\";\n\
         ssl.ca.location=/etc/kafka/ca.pem\n",
    )
    .unwrap();
    let sasl = c.sasl.unwrap();
    assert_eq!(sasl.mechanism, Mechanism::ScramSha256);
    assert_eq!(sasl.username, "alice");
    assert_eq!(sasl.password.expose(), "s3cret");
    assert_eq!(c.security_protocol, SecurityProtocol::SaslSsl);
}

/// A librdkafka configuration as people write one (after librdkafka's CONFIGURATION.md and
/// kcat's `-F` files): every line is taken or refused, with the reason.
#[test]
fn a_librdkafka_file_line_by_line() {
    let text = "\
# kcat / librdkafka producer settings
metadata.broker.list=k1:9092,k2:9092
client.id=orders-producer
queue.buffering.max.ms=10
batch.num.messages=10000
compression.codec=lz4
request.required.acks=-1
enable.idempotence=true
message.timeout.ms=120000
socket.keepalive.enable=true
statistics.interval.ms=60000
queue.buffering.max.kbytes=1048576
linger.msec=5
";
    let (b, lines) = Config::builder(Vec::<(String, u16)>::new()).apply_properties_text(text);
    let refused: Vec<(usize, String)> = lines
        .iter()
        .filter_map(|l| l.outcome.as_ref().err().map(|e| (l.line, e.to_string())))
        .collect();
    let taken: Vec<&str> = lines
        .iter()
        .filter(|l| l.outcome.is_ok())
        .filter_map(|l| l.name.as_deref())
        .collect();
    assert!(taken.contains(&"metadata.broker.list"), "{refused:?}");
    assert!(taken.contains(&"queue.buffering.max.ms"), "{refused:?}");
    assert!(taken.contains(&"compression.codec"), "{refused:?}");
    assert!(taken.contains(&"request.required.acks"), "{refused:?}");
    // The misspelling is refused with its line and the nearest name.
    let linger = refused
        .iter()
        .find(|(line, _)| *line == 13)
        .expect("line 13 refused");
    assert!(
        linger.1.contains("did you mean \"linger.ms\""),
        "{linger:?}"
    );
    // Every refused line says why, with its line number.
    for (line, why) in &refused {
        assert!(why.starts_with(&format!("line {line}: ")), "{why}");
    }
    assert_eq!(
        taken.len() + refused.len(),
        12,
        "one outcome per setting line"
    );
    // librdkafka-only settings this producer does not have are refused as unsupported.
    for (line, name) in [
        (5, "batch.num.messages"),
        (10, "socket.keepalive.enable"),
        (11, "statistics.interval.ms"),
    ] {
        let why = &refused.iter().find(|(l, _)| *l == line).expect(name).1;
        assert!(why.contains(name) && why.contains("not supported"), "{why}");
    }
    assert_eq!(refused.len(), 4, "{refused:#?}");
    let c = b.build().expect("the accepted lines go together");
    assert_eq!(c.linger, Duration::from_millis(10));
    assert_eq!(c.compression, crate::Compression::Lz4);
    assert_eq!(c.client_id, "orders-producer");
    // The first refusal is what set_properties_text reports.
    let first = Config::builder(Vec::<(String, u16)>::new())
        .set_properties_text(text)
        .unwrap_err();
    assert_eq!(first.to_string(), refused[0].1);
}

/// A Java `producer.properties` as found in deployments (Kafka's own config/producer.properties
/// plus common additions): interceptors and a custom partitioner are refused as unsupported,
/// with the line.
#[test]
fn a_java_file_line_by_line() {
    let text = "\
bootstrap.servers=localhost:9092
compression.type=none
partitioner.class=com.example.MyPartitioner
interceptor.classes=io.confluent.monitoring.clients.interceptor.MonitoringProducerInterceptor
key.serializer=org.apache.kafka.common.serialization.StringSerializer
linger.ms=5
batch.size=65536
acks=all
max.in.flight.requests.per.connection=5
retries=2147483647
";
    let (b, lines) = Config::builder(Vec::<(String, u16)>::new()).apply_properties_text(text);
    let outcome = |line: usize| {
        lines
            .iter()
            .find(|l| l.line == line)
            .map(|l| l.outcome.clone())
            .expect("a setting line")
    };
    assert!(outcome(1).is_ok());
    for line in [3, 4] {
        match outcome(line) {
            Err(PropertyError::AtLine { line: l, error }) => {
                assert_eq!(l, line);
                assert!(
                    matches!(*error, PropertyError::Unsupported { .. }),
                    "{error}"
                );
            }
            other => panic!("line {line}: {other:?}"),
        }
    }
    assert!(outcome(6).is_ok() && outcome(7).is_ok() && outcome(8).is_ok());
    let refused: Vec<String> = lines
        .iter()
        .filter_map(|l| l.outcome.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert!(
        refused.iter().all(|r| r.starts_with("line ")),
        "{refused:?}"
    );
    let c = b.build().unwrap();
    assert_eq!(c.batch_size, 65536);
    assert_eq!(c.linger, Duration::from_millis(5));
}

/// The adaptive partitioner's settings by their Java names (ProducerConfig.java:
/// `PARTITIONER_ADPATIVE_PARTITIONING_ENABLE_CONFIG`, `PARTITIONER_AVAILABILITY_TIMEOUT_MS_CONFIG`,
/// `PARTITIONER_IGNORE_KEYS_CONFIG`), with Java's defaults, and bad values refused by name.
#[test]
fn partitioner_settings_by_their_java_names() {
    let d = Config::builder([("h", 1)]).build().unwrap();
    assert!(d.adaptive_partitioning);
    assert_eq!(d.partitioner_availability_timeout, Duration::ZERO);
    assert!(!d.partitioner_ignore_keys);
    let c = Config::from_properties([
        ("bootstrap.servers", "k:9092"),
        ("partitioner.adaptive.partitioning.enable", "false"),
        ("partitioner.availability.timeout.ms", "250"),
        ("partitioner.ignore.keys", "TRUE"),
    ])
    .unwrap();
    assert!(!c.adaptive_partitioning);
    assert_eq!(
        c.partitioner_availability_timeout,
        Duration::from_millis(250)
    );
    assert!(c.partitioner_ignore_keys);
    // KIP-714's switch, on by default as in Java.
    assert!(d.enable_metrics_push);
    let off = Config::from_properties([
        ("bootstrap.servers", "k:9092"),
        ("enable.metrics.push", "false"),
    ])
    .unwrap();
    assert!(!off.enable_metrics_push);
    let b = || Config::builder([("h", 1)]);
    for (name, value, form) in [
        (
            "partitioner.adaptive.partitioning.enable",
            "yes",
            "true or false",
        ),
        ("partitioner.availability.timeout.ms", "-1", "milliseconds"),
        ("partitioner.ignore.keys", "1", "true or false"),
    ] {
        assert_eq!(
            b().set(name, value).unwrap_err(),
            PropertyError::BadValue {
                name: name.into(),
                form
            }
        );
    }
    // A custom partitioner class stays refused, and says what can be tuned instead.
    match b().set("partitioner.class", "x").unwrap_err() {
        PropertyError::Unsupported { why, .. } => {
            assert!(why.contains("partitioner.ignore.keys"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_say_what_is_wrong() {
    let b = || Config::builder([("h", 1)]);
    assert_eq!(
        b().set("linger.msec", "5").unwrap_err(),
        PropertyError::Unknown {
            name: "linger.msec".into(),
            nearest: Some("linger.ms")
        }
    );
    assert!(matches!(
        b().set("frobnicate", "5").unwrap_err(),
        PropertyError::Unknown { nearest: None, .. }
    ));
    assert!(matches!(
        b().set("partitioner.class", "x").unwrap_err(),
        PropertyError::Unsupported { .. }
    ));
    assert_eq!(
        b().set("acks", "most").unwrap_err(),
        PropertyError::BadValue {
            name: "acks".into(),
            form: "all, -1, 0 or 1"
        }
    );
    let e = b()
        .set("sasl.jaas.config", "garbage password=\"hunter2\"")
        .unwrap_err();
    assert!(!e.to_string().contains("hunter2"), "{e}");
    assert!(matches!(
        Config::from_properties_text("bootstrap.servers=a:1\njust words\n").unwrap_err(),
        PropertyError::Malformed { line: 2, .. }
    ));
    assert!(matches!(
        Config::from_properties([("security.protocol", "SASL_PLAINTEXT")]).unwrap_err(),
        PropertyError::Config(ConfigError::NoBootstrapServers)
    ));
}

/// No error shows a value, for any setting by any of its spellings: a bad value is named by its
/// setting and the form expected, whether it comes through `set`, a `.properties` text (where
/// the error names the line) or its line-by-line report. A line that is not `name=value` (a
/// secret written with a blank as its separator) is named by its number, not shown.
#[test]
fn a_properties_error_names_the_key_only() {
    const SECRET: &str = "hunter2-do-not-print";
    let b = || Config::builder([("h", 1)]);
    // Values no setting takes, each carrying the secret.
    let bad_values = [
        SECRET.to_string(),
        format!("1{SECRET}"),
        format!("{SECRET}:9092"),
        format!("org.example.LoginModule required username=\"u\" password=\"{SECRET}\";"),
        format!(
            "org.apache.kafka.common.security.plain.PlainLoginModule required \
             password=\"{SECRET}\";"
        ),
    ];
    let mut refused = 0;
    for s in SETTINGS {
        for name in s.names {
            for value in &bad_values {
                let Err(e) = b().set(name, value) else {
                    continue; // a string setting takes any value
                };
                refused += 1;
                for shown in [e.to_string(), format!("{e:?}")] {
                    assert!(!shown.contains(SECRET), "{name}: {shown}");
                    assert!(
                        shown.contains(name),
                        "{name}: the setting is named: {shown}"
                    );
                }
                assert_eq!(
                    e,
                    PropertyError::BadValue {
                        name: name.to_string(),
                        form: s.form
                    }
                );
            }
        }
    }
    assert!(
        refused > 100,
        "only {refused} refusals: the values are not bad enough"
    );
    // Through a .properties text: the line and the setting are named, the value is not.
    let text = format!(
        "bootstrap.servers=k:9092\n\
         sasl.jaas.config=org.example.Login required password=\"{SECRET}\";\n\
         sasl.password {SECRET}\n\
         acks={SECRET}\n"
    );
    let (_, lines) = Config::builder(Vec::<(String, u16)>::new()).apply_properties_text(&text);
    let errors: Vec<PropertyError> = lines.into_iter().filter_map(|l| l.outcome.err()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    for e in &errors {
        for shown in [e.to_string(), format!("{e:?}")] {
            assert!(!shown.contains(SECRET), "{shown}");
        }
    }
    assert_eq!(
        errors[0].to_string(),
        "line 2: setting \"sasl.jaas.config\": expected a JAAS line for PlainLoginModule or \
         ScramLoginModule with username=\"...\" password=\"...\""
    );
    assert_eq!(errors[1], PropertyError::Malformed { line: 3 });
    assert_eq!(
        errors[2].to_string(),
        "line 4: setting \"acks\": expected all, -1, 0 or 1"
    );
    let first = Config::from_properties_text(&text).unwrap_err();
    assert!(!format!("{first} {first:?}").contains(SECRET));
}

/// `sasl.login.read.timeout.ms` sets how long the OAUTHBEARER token provider may take.
#[test]
fn the_token_timeout_by_its_java_name() {
    let c = Config::from_properties([
        ("bootstrap.servers", "k:9092"),
        ("sasl.login.read.timeout.ms", "2500"),
    ])
    .unwrap();
    assert_eq!(c.token_timeout, Duration::from_millis(2500));
    assert_eq!(
        Config::builder([("h", 1)]).build().unwrap().token_timeout,
        Duration::from_secs(30)
    );
}

/// Durations beyond [`Config::MAX_DURATION`] and sizes beyond what the protocol carries are
/// typed errors when set by name too, never a panic; a number too large for 64 bits is a bad
/// value.
#[test]
fn huge_values_by_name_are_typed_errors() {
    for name in [
        "linger.ms",
        "request.timeout.ms",
        "delivery.timeout.ms",
        "max.block.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "metadata.max.age.ms",
        "metadata.recovery.rebootstrap.trigger.ms",
        "partitioner.availability.timeout.ms",
        "transaction.timeout.ms",
        "sasl.login.read.timeout.ms",
    ] {
        let e = Config::from_properties([
            ("bootstrap.servers", "k:9092"),
            (name, &u64::MAX.to_string()),
        ])
        .unwrap_err();
        assert!(
            matches!(e, PropertyError::Config(ConfigError::DurationTooLong(_))),
            "{name}: {e:?}"
        );
        let e = Config::builder([("h", 1)])
            .set(name, "184467440737095516150")
            .unwrap_err();
        assert!(matches!(e, PropertyError::BadValue { .. }), "{name}: {e:?}");
    }
    let max = usize::MAX.to_string();
    let e = Config::from_properties([("bootstrap.servers", "k:9092"), ("max.request.size", &max)])
        .unwrap_err();
    assert_eq!(
        e,
        PropertyError::Config(ConfigError::MaxRequestSizeTooLarge(usize::MAX))
    );
    let c = Config::from_properties([
        ("bootstrap.servers", "k:9092"),
        ("batch.size", &max),
        ("buffer.memory", &max),
        ("queue.buffering.max.messages", &max),
    ])
    .unwrap();
    assert_eq!(c.batch_size, c.max_request_size, "batch.size is capped");
    assert_eq!(c.buffer_memory, usize::MAX);
    let e = Config::builder([("h", 1)])
        .set("queue.buffering.max.kbytes", &max)
        .unwrap_err();
    assert!(matches!(e, PropertyError::BadValue { .. }), "{e:?}");
}
