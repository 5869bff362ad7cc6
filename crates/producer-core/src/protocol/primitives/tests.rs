use super::*;
use proptest::prelude::*;

#[test]
fn varint_edges() {
    for v in [0i32, 1, -1, 63, -64, 64, i32::MAX, i32::MIN] {
        let mut b = Vec::new();
        b.put_varint(v);
        assert_eq!(b.len(), varint_len(v));
        assert_eq!(varint(&b).unwrap(), (&[][..], v));
    }
    // Kafka's own examples: zigzag(1) = 2, zigzag(-1) = 1.
    let mut b = Vec::new();
    b.put_varint(-1);
    assert_eq!(b, [1]);
    b.clear();
    b.put_varint(300);
    assert_eq!(b, [0xd8, 0x04]);
}

#[test]
fn overlong_varint_is_an_error() {
    assert_eq!(
        uvarint(&[0xff; 6]).unwrap_err(),
        nom::Err::Error(WireError::new(&[0xff; 6], WireErrorKind::VarintTooLong))
    );
    assert!(matches!(
        uvarint(&[0x80]),
        Err(nom::Err::Error(WireError {
            kind: WireErrorKind::Truncated,
            ..
        }))
    ));
}

#[test]
fn huge_array_length_does_not_allocate() {
    let mut b = Vec::new();
    b.put_i32(i32::MAX);
    let r = array(false, 4, int32)(&b);
    assert!(matches!(
        r,
        Err(nom::Err::Error(WireError {
            kind: WireErrorKind::InvalidLength(_),
            ..
        }))
    ));
}

#[test]
fn a_claim_the_bytes_cannot_hold_at_the_minimum_size_is_refused_before_allocating() {
    // 3 elements of at least 4 bytes need 12 bytes; 11 are there.
    let mut b = Vec::new();
    b.put_i32(3);
    b.extend_from_slice(&[0; 11]);
    assert!(matches!(
        array(false, 4, int32)(&b),
        Err(nom::Err::Error(WireError {
            kind: WireErrorKind::InvalidLength(3),
            ..
        }))
    ));
    // With the 12th byte it parses.
    b.push(0);
    assert_eq!(array(false, 4, int32)(&b).unwrap().1, vec![0, 0, 0]);
}

#[test]
fn a_large_claim_reserves_a_few_kib_until_its_elements_parse() {
    // 100,000 claimed elements of 16 bytes (1.6 MB), with the bytes for them all, but the
    // first element fails: the vector reserved no more than the initial 4 KiB.
    assert!(initial_capacity::<[u8; 16]>(100_000) * 16 <= INITIAL_RESERVATION);
    assert_eq!(initial_capacity::<[u8; 16]>(3), 3);
    assert_eq!(initial_capacity::<[u8; 8192]>(3), 1);
    // Whole arrays still come out whole, past the initial reservation.
    let mut b = Vec::new();
    b.put_array_len(true, 5000);
    for x in 0..5000 {
        b.put_i64(x);
    }
    let (rest, got) = array(true, 8, int64)(&b).unwrap();
    assert!(rest.is_empty());
    assert_eq!(got, (0..5000).collect::<Vec<i64>>());
}

#[test]
fn field_names_the_innermost_failure() {
    let mut p = field("outer", field("inner", int32));
    let err = p(&[0, 1]).unwrap_err();
    match err {
        nom::Err::Error(e) => assert_eq!(e.field, "inner"),
        other => panic!("{other:?}"),
    }
}

proptest! {
    #[test]
    fn varlong_round_trip(v: i64) {
        let mut b = Vec::new();
        b.put_varlong(v);
        prop_assert_eq!(b.len(), varlong_len(v));
        prop_assert_eq!(varlong(&b).unwrap(), (&[][..], v));
    }

    #[test]
    fn uvarint_round_trip(v: u32) {
        let mut b = Vec::new();
        b.put_uvarint(v);
        prop_assert_eq!(b.len(), uvarint_len(v));
        prop_assert_eq!(uvarint(&b).unwrap(), (&[][..], v));
    }

    #[test]
    fn strings_round_trip(s in proptest::option::of(".{0,40}"), flexible: bool) {
        let mut b = Vec::new();
        b.put_nullable_string(flexible, s.as_deref());
        prop_assert_eq!(nullable_string(flexible)(&b).unwrap(), (&[][..], s));
    }

    #[test]
    fn bytes_round_trip(v in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..300)), flexible: bool) {
        let mut b = Vec::new();
        b.put_nullable_bytes(flexible, v.as_deref());
        prop_assert_eq!(nullable_bytes(flexible)(&b).unwrap(), (&[][..], v.as_deref()));
    }

    #[test]
    fn arrays_and_tags_round_trip(v in proptest::collection::vec(any::<i32>(), 0..50), flexible: bool) {
        let mut b = Vec::new();
        b.put_array_len(flexible, v.len());
        for x in &v { b.put_i32(*x); }
        put_tags(&mut b, flexible, &[(0, &[1, 2]), (7, &[])]);
        let (rest, got) = array(flexible, 4, int32)(&b).unwrap();
        prop_assert_eq!(&got, &v);
        let mut seen = Vec::new();
        let (rest, ()) = tagged_fields(rest, flexible, |t, d| { seen.push((t, d.to_vec())); Ok(()) }).unwrap();
        prop_assert!(rest.is_empty());
        if flexible { prop_assert_eq!(seen, vec![(0, vec![1, 2]), (7, vec![])]); }
    }

    #[test]
    fn parsers_never_panic(data: Vec<u8>, flexible: bool) {
        let _ = nullable_string(flexible)(&data);
        let _ = nullable_bytes(flexible)(&data);
        let _ = array(flexible, 8, int64)(&data);
        let _ = skip_tags(&data, flexible);
        let _ = varlong(&data);
    }
}
