use super::*;

#[test]
fn empty_builder_is_just_the_header() {
    let b = BatchBuilder::new();
    assert!(b.is_empty());
    assert_eq!(b.len(), 0);
    assert_eq!(b.size_in_bytes(), RECORD_BATCH_OVERHEAD);
    assert_eq!(b.base_timestamp(), None);
}

/// [`BatchBuilder::first_record_sizes`] gives what [`BatchBuilder::payload_size`] and
/// [`BatchBuilder::record_size_with_payload`] compute, around every varint boundary of every
/// field.
#[test]
fn first_record_sizes_are_the_payload_and_record_sizes() {
    let lengths = [
        0, 1, 63, 64, 65, 127, 128, 8_191, 8_192, 8_193, 70_000, 1_048_575, 1_048_576,
    ];
    for &len in &lengths {
        let big = vec![7u8; len];
        let small = vec![1u8; len % 9000];
        let headers: Vec<Header> = (0..(len % 70))
            .map(|i| {
                let value = (i % 3 != 0).then(|| Bytes::from(vec![2u8; i * len % 300]));
                Header::new(format!("h{i}"), value)
            })
            .collect();
        let one_header = [Header::new("k".repeat(len % 9000), None)];
        type Shape<'a> = (Option<&'a [u8]>, Option<&'a [u8]>, &'a [Header]);
        let shapes: [Shape<'_>; 6] = [
            (None, Some(&big), &[]),
            (Some(&small), Some(&big), &[]),
            (Some(&big), Some(b"v"), &[]),
            (Some(b"k"), None, &[]),
            (None, Some(b"v"), &headers),
            (None, Some(b"v"), &one_header),
        ];
        for (key, value, headers) in shapes {
            let payload = BatchBuilder::payload_size(key, value, headers);
            let encoded = BatchBuilder::record_size_with_payload(0, 0, payload);
            assert_eq!(
                BatchBuilder::first_record_sizes(key, value, headers),
                (payload, encoded),
                "length {len}"
            );
        }
    }
}

#[test]
fn estimated_size_is_exact_without_compression() {
    let mut b = BatchBuilder::new();
    let h = [Header::new("k", Some(Bytes::from_static(b"v")))];
    for (i, ts) in [1000i64, 990, 5000, -3].into_iter().enumerate() {
        let est = b.estimated_size_with(ts, Some(b"key"), Some(&[1; 200]), &h);
        b.append(ts, Some(b"key"), Some(&[1; 200]), &h);
        assert_eq!(b.size_in_bytes(), est, "record {i}");
    }
    assert_eq!(b.len(), 4);
    let mut s = b.seal(Compression::None).unwrap();
    assert_eq!(s.base_timestamp(), 1000);
    assert_eq!(s.max_timestamp(), 5000);
    s.stamp(1, 2, 3);
    assert_eq!(
        (s.producer_id(), s.producer_epoch(), s.base_sequence()),
        (1, 2, 3)
    );
    assert_eq!(s.len_bytes(), s.uncompressed_size());
}

#[test]
fn with_buffer_discards_old_contents() {
    let mut b = BatchBuilder::new();
    b.append(1, None, Some(b"x"), &[]);
    let mut s = b.seal(Compression::None).unwrap();
    s.stamp(-1, -1, -1);
    let buf = s.into_buffer();
    let cap = buf.capacity();
    let b = BatchBuilder::with_buffer(buf);
    assert_eq!(b.size_in_bytes(), RECORD_BATCH_OVERHEAD);
    assert!(b.is_empty());
    assert_eq!(b.buf.capacity(), cap);
}

#[test]
fn shared_bytes_never_change_and_are_taken_back_once_dropped() {
    let mut b = BatchBuilder::new();
    b.append(1, None, Some(b"x"), &[]);
    let mut s = b.seal(Compression::None).unwrap();
    s.stamp(1, 0, 0);
    let first = s.share();
    assert_eq!(&first[..], s.as_bytes(), "no copy: the same bytes");
    assert_eq!(first.as_ptr(), s.as_bytes().as_ptr());
    // A retry with a new sequence while the first attempt's bytes are still held: the
    // batch gets a copy, what was shared stays as it was.
    let before = first.to_vec();
    s.stamp(1, 0, 5);
    assert_eq!(&first[..], &before[..]);
    assert_eq!(s.base_sequence(), 5);
    assert_ne!(first.as_ptr(), s.as_bytes().as_ptr());
    // Once nothing holds them, a new stamp takes the buffer back without a copy.
    let second = s.share();
    let ptr = second.as_ptr();
    drop(second);
    drop(first);
    s.stamp(1, 1, 0);
    assert_eq!(s.as_bytes().as_ptr(), ptr);
    assert_eq!(s.producer_epoch(), 1);
    let held = s.share();
    assert!(
        s.into_buffer().is_empty(),
        "a buffer still shared is not reused"
    );
    drop(held);
}

#[test]
fn empty_batch_seals_with_no_timestamp() {
    let mut s = BatchBuilder::new().seal(Compression::None).unwrap();
    s.stamp(-1, -1, -1);
    assert_eq!(s.record_count(), 0);
    assert_eq!(s.base_timestamp(), -1);
    assert_eq!(s.len_bytes(), RECORD_BATCH_OVERHEAD);
    // LastOffsetDelta = -1
    assert_eq!(&s.as_bytes()[23..27], &[0xff; 4]);
}
