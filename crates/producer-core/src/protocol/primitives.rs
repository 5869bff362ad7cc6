//! Kafka protocol primitive types: how each is written and how each is parsed.
//!
//! Writing goes through [`Put`], an extension trait on `Vec<u8>` (the caller owns and reuses the
//! buffer). Parsing uses nom: every parser takes `&[u8]` and returns [`PResult`], whose error is a
//! [`WireError`] carrying the field being parsed, so a failure says *where* it happened.
//!
//! Lengths read from the wire are never trusted for allocation. An array's claimed length must
//! fit in the bytes left at its elements' minimum wire size (each caller says what that is), and
//! even then only a few KiB are reserved up front: the vector grows as elements actually parse,
//! so what it holds is bounded by the bytes that encoded it. Strings and byte fields are sliced
//! (bounds-checked) before anything is copied.

use nom::error::{ContextError, ErrorKind as NomErrorKind, ParseError};
use nom::number::complete::{be_i16, be_i32, be_i64, be_i8, be_u8};
use nom::{IResult, Parser};

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Length of the unsigned varint encoding of `v`.
#[inline]
pub fn uvarint_len(v: u32) -> usize {
    match v {
        0..=0x7f => 1,
        0x80..=0x3fff => 2,
        0x4000..=0x1f_ffff => 3,
        0x20_0000..=0x0fff_ffff => 4,
        _ => 5,
    }
}

/// Length of the unsigned varlong encoding of `v`.
#[inline]
pub fn uvarlong_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Length of the zigzag varint encoding of `v` (record fields).
#[inline]
pub fn varint_len(v: i32) -> usize {
    uvarint_len(zigzag32(v))
}

/// Length of the zigzag varlong encoding of `v` (record fields).
#[inline]
pub fn varlong_len(v: i64) -> usize {
    uvarlong_len(zigzag64(v))
}

#[inline]
pub(crate) fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

#[inline]
pub(crate) fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Writing Kafka primitives into a growable byte buffer.
///
/// `flexible` arguments select the compact encodings of flexible API versions (KIP-482):
/// unsigned-varint `length + 1` prefixes, 0 meaning null.
///
/// # Lengths never wrap
/// A string, bytes or array whose length does not fit its prefix (INT16 for a STRING, INT32
/// for BYTES and ARRAY, `u32::MAX - 1` for the compact forms) is never written with a wrapped
/// length, which would make the bytes after it read as other fields: the writers panic
/// instead. The producer bounds every length before it reaches them (`client.id`,
/// `transactional.id` and SASL credentials when its configuration is built, topic names and
/// record sizes at `send`, OAUTHBEARER tokens when handed over), so the panic marks a bug, not
/// an input.
pub trait Put {
    /// INT8.
    fn put_i8(&mut self, v: i8);
    /// INT16, big-endian.
    fn put_i16(&mut self, v: i16);
    /// INT32, big-endian.
    fn put_i32(&mut self, v: i32);
    /// INT64, big-endian.
    fn put_i64(&mut self, v: i64);
    /// UINT32, big-endian.
    fn put_u32(&mut self, v: u32);
    /// BOOLEAN as one byte.
    fn put_bool(&mut self, v: bool);
    /// UUID as 16 bytes.
    fn put_uuid(&mut self, v: [u8; 16]);
    /// UNSIGNED_VARINT.
    fn put_uvarint(&mut self, v: u32);
    /// Unsigned varlong (64-bit base-128).
    fn put_uvarlong(&mut self, v: u64);
    /// VARINT (zigzag).
    fn put_varint(&mut self, v: i32);
    /// VARLONG (zigzag).
    fn put_varlong(&mut self, v: i64);
    /// STRING or COMPACT_STRING.
    fn put_string(&mut self, flexible: bool, s: &str);
    /// NULLABLE_STRING or COMPACT_NULLABLE_STRING.
    fn put_nullable_string(&mut self, flexible: bool, s: Option<&str>);
    /// BYTES or COMPACT_BYTES.
    fn put_bytes(&mut self, flexible: bool, b: &[u8]);
    /// NULLABLE_BYTES or COMPACT_NULLABLE_BYTES.
    fn put_nullable_bytes(&mut self, flexible: bool, b: Option<&[u8]>);
    /// The length prefix of ARRAY or COMPACT_ARRAY with `n` elements.
    fn put_array_len(&mut self, flexible: bool, n: usize);
    /// The length prefix of a nullable array (`None` = null).
    fn put_nullable_array_len(&mut self, flexible: bool, n: Option<usize>);
    /// An empty tagged-field section (flexible versions only; does nothing otherwise).
    fn put_empty_tags(&mut self, flexible: bool);
}

impl Put for Vec<u8> {
    #[inline]
    fn put_i8(&mut self, v: i8) {
        self.push(v as u8);
    }
    #[inline]
    fn put_i16(&mut self, v: i16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn put_i32(&mut self, v: i32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn put_i64(&mut self, v: i64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    #[inline]
    fn put_bool(&mut self, v: bool) {
        self.push(v as u8);
    }
    #[inline]
    fn put_uuid(&mut self, v: [u8; 16]) {
        self.extend_from_slice(&v);
    }
    #[inline]
    fn put_uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.push(v as u8);
    }
    #[inline]
    fn put_uvarlong(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.push(v as u8);
    }
    #[inline]
    fn put_varint(&mut self, v: i32) {
        self.put_uvarint(zigzag32(v));
    }
    #[inline]
    fn put_varlong(&mut self, v: i64) {
        self.put_uvarlong(zigzag64(v));
    }
    fn put_string(&mut self, flexible: bool, s: &str) {
        self.put_bytes_prefix(flexible, s.len());
        self.extend_from_slice(s.as_bytes());
    }
    fn put_nullable_string(&mut self, flexible: bool, s: Option<&str>) {
        match s {
            Some(s) => self.put_string(flexible, s),
            None if flexible => self.put_uvarint(0),
            None => self.put_i16(-1),
        }
    }
    fn put_bytes(&mut self, flexible: bool, b: &[u8]) {
        self.put_wide_prefix(flexible, b.len());
        self.extend_from_slice(b);
    }
    fn put_nullable_bytes(&mut self, flexible: bool, b: Option<&[u8]>) {
        match b {
            Some(b) => self.put_bytes(flexible, b),
            None if flexible => self.put_uvarint(0),
            None => self.put_i32(-1),
        }
    }
    fn put_array_len(&mut self, flexible: bool, n: usize) {
        self.put_wide_prefix(flexible, n);
    }
    fn put_nullable_array_len(&mut self, flexible: bool, n: Option<usize>) {
        match n {
            Some(n) => self.put_array_len(flexible, n),
            None if flexible => self.put_uvarint(0),
            None => self.put_i32(-1),
        }
    }
    #[inline]
    fn put_empty_tags(&mut self, flexible: bool) {
        if flexible {
            self.push(0);
        }
    }
}

/// Length prefixes, shared by the writers: INT16 (strings) or INT32 (bytes, arrays), or the
/// compact `length + 1`. Each checks that the length fits (see [`Put`]: never wrapped).
trait PutLengthPrefix {
    fn put_bytes_prefix(&mut self, flexible: bool, len: usize);
    fn put_wide_prefix(&mut self, flexible: bool, len: usize);
    fn put_compact_prefix(&mut self, len: usize);
}

impl PutLengthPrefix for Vec<u8> {
    #[inline]
    fn put_bytes_prefix(&mut self, flexible: bool, len: usize) {
        if flexible {
            self.put_compact_prefix(len);
        } else {
            let len = i16::try_from(len)
                .unwrap_or_else(|_| panic!("a string of {len} bytes does not fit INT16"));
            self.put_i16(len);
        }
    }

    #[inline]
    fn put_wide_prefix(&mut self, flexible: bool, len: usize) {
        if flexible {
            self.put_compact_prefix(len);
        } else {
            let len = i32::try_from(len)
                .unwrap_or_else(|_| panic!("a length of {len} does not fit INT32"));
            self.put_i32(len);
        }
    }

    #[inline]
    fn put_compact_prefix(&mut self, len: usize) {
        let len = u32::try_from(len)
            .ok()
            .and_then(|l| l.checked_add(1))
            .unwrap_or_else(|| panic!("a length of {len} does not fit UNSIGNED_VARINT"));
        self.put_uvarint(len);
    }
}

/// The writers' length prefixes at their limits, and past them (see [`Put`]).
#[cfg(test)]
mod put_length_tests {
    use super::*;

    #[test]
    fn a_string_of_i16_max_bytes_has_its_exact_prefix() {
        let s = "s".repeat(i16::MAX as usize);
        let mut buf = Vec::new();
        buf.put_string(false, &s);
        assert_eq!(&buf[..2], &i16::MAX.to_be_bytes());
        assert_eq!(buf.len(), 2 + s.len());
        let mut compact = Vec::new();
        compact.put_string(true, &s);
        assert_eq!(compact.len(), uvarint_len(i16::MAX as u32 + 1) + s.len());
    }

    #[test]
    #[should_panic(expected = "does not fit INT16")]
    fn a_string_one_byte_too_long_for_int16_is_never_wrapped() {
        Vec::new().put_string(false, &"s".repeat(i16::MAX as usize + 1));
    }

    #[test]
    #[should_panic(expected = "does not fit INT16")]
    fn a_nullable_string_too_long_for_int16_is_never_wrapped() {
        Vec::new().put_nullable_string(false, Some(&"s".repeat(1 << 16)));
    }

    #[test]
    #[should_panic(expected = "does not fit INT32")]
    fn an_array_too_long_for_int32_is_never_wrapped() {
        Vec::new().put_array_len(false, i32::MAX as usize + 1);
    }

    #[test]
    #[should_panic(expected = "does not fit UNSIGNED_VARINT")]
    fn a_compact_length_too_long_for_u32_is_never_wrapped() {
        Vec::new().put_array_len(true, u32::MAX as usize);
    }
}

/// Writes a tagged-field section holding the given `(tag, encoded value)` pairs, which must be
/// sorted by tag. Writes nothing when `flexible` is false.
pub fn put_tags(buf: &mut Vec<u8>, flexible: bool, tags: &[(u32, &[u8])]) {
    if !flexible {
        return;
    }
    buf.put_uvarint(tags.len() as u32);
    for (tag, data) in tags {
        buf.put_uvarint(*tag);
        buf.put_uvarint(data.len() as u32);
        buf.extend_from_slice(data);
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// What went wrong while parsing one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireErrorKind {
    /// The input ended inside the field.
    Truncated,
    /// A length prefix was negative (and not the null marker) or impossibly large.
    InvalidLength(i64),
    /// A string field held bytes that are not UTF-8.
    InvalidUtf8,
    /// A varint ran past its maximum number of bytes.
    VarintTooLong,
    /// A null appeared where the schema does not allow null.
    UnexpectedNull,
    /// A value outside its allowed set (for example a BOOLEAN byte other than 0 or 1).
    InvalidValue,
}

/// A nom error that remembers the innermost field being parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The innermost field name given with [`field`], or `""` when none was.
    pub field: &'static str,
    /// What went wrong.
    pub kind: WireErrorKind,
    /// Bytes left in the input where it went wrong.
    pub remaining: usize,
}

impl WireError {
    fn new(input: &[u8], kind: WireErrorKind) -> Self {
        WireError {
            field: "",
            kind,
            remaining: input.len(),
        }
    }
}

impl<'a> ParseError<&'a [u8]> for WireError {
    fn from_error_kind(input: &'a [u8], _kind: NomErrorKind) -> Self {
        // The nom parsers this crate uses fail only by running out of input.
        WireError::new(input, WireErrorKind::Truncated)
    }
    fn append(_input: &'a [u8], _kind: NomErrorKind, other: Self) -> Self {
        other
    }
}

impl<'a> ContextError<&'a [u8]> for WireError {
    fn add_context(_input: &'a [u8], ctx: &'static str, mut other: Self) -> Self {
        if other.field.is_empty() {
            other.field = ctx;
        }
        other
    }
}

/// The result type of every parser in this crate.
pub type PResult<'a, O> = IResult<&'a [u8], O, WireError>;

#[inline]
fn fail<O>(input: &[u8], kind: WireErrorKind) -> PResult<'_, O> {
    Err(nom::Err::Error(WireError::new(input, kind)))
}

/// Runs `parser` and, if it fails, names `name` as the field that failed (innermost name wins).
#[inline]
pub fn field<'a, O>(
    name: &'static str,
    mut parser: impl FnMut(&'a [u8]) -> PResult<'a, O>,
) -> impl FnMut(&'a [u8]) -> PResult<'a, O> {
    move |input| {
        parser(input).map_err(|e| {
            e.map(|mut err| {
                if err.field.is_empty() {
                    err.field = name;
                }
                err
            })
        })
    }
}

/// INT8.
#[inline]
pub fn int8(i: &[u8]) -> PResult<'_, i8> {
    be_i8(i)
}
/// INT16.
#[inline]
pub fn int16(i: &[u8]) -> PResult<'_, i16> {
    be_i16(i)
}
/// INT32.
#[inline]
pub fn int32(i: &[u8]) -> PResult<'_, i32> {
    be_i32(i)
}
/// INT64.
#[inline]
pub fn int64(i: &[u8]) -> PResult<'_, i64> {
    be_i64(i)
}
/// BOOLEAN: one byte, 0 or 1 (other non-zero values are read as true, as Kafka does).
#[inline]
pub fn boolean(i: &[u8]) -> PResult<'_, bool> {
    let (i, b) = be_u8(i)?;
    Ok((i, b != 0))
}
/// UUID: 16 raw bytes.
pub fn uuid(i: &[u8]) -> PResult<'_, [u8; 16]> {
    if i.len() < 16 {
        return fail(i, WireErrorKind::Truncated);
    }
    let mut out = [0u8; 16];
    out.copy_from_slice(&i[..16]);
    Ok((&i[16..], out))
}

/// UNSIGNED_VARINT (at most 5 bytes).
#[inline]
pub fn uvarint(input: &[u8]) -> PResult<'_, u32> {
    let mut value: u32 = 0;
    for (idx, &b) in input.iter().enumerate().take(5) {
        if idx == 4 && b > 0x0f {
            return fail(input, WireErrorKind::VarintTooLong);
        }
        value |= ((b & 0x7f) as u32) << (7 * idx);
        if b & 0x80 == 0 {
            return Ok((&input[idx + 1..], value));
        }
    }
    if input.len() >= 5 {
        fail(input, WireErrorKind::VarintTooLong)
    } else {
        fail(input, WireErrorKind::Truncated)
    }
}

/// Unsigned varlong (at most 10 bytes).
#[inline]
pub fn uvarlong(input: &[u8]) -> PResult<'_, u64> {
    let mut value: u64 = 0;
    for (idx, &b) in input.iter().enumerate().take(10) {
        if idx == 9 && b > 0x01 {
            return fail(input, WireErrorKind::VarintTooLong);
        }
        value |= ((b & 0x7f) as u64) << (7 * idx);
        if b & 0x80 == 0 {
            return Ok((&input[idx + 1..], value));
        }
    }
    if input.len() >= 10 {
        fail(input, WireErrorKind::VarintTooLong)
    } else {
        fail(input, WireErrorKind::Truncated)
    }
}

/// VARINT (zigzag).
#[inline]
pub fn varint(i: &[u8]) -> PResult<'_, i32> {
    let (i, v) = uvarint(i)?;
    Ok((i, ((v >> 1) as i32) ^ -((v & 1) as i32)))
}

/// VARLONG (zigzag).
#[inline]
pub fn varlong(i: &[u8]) -> PResult<'_, i64> {
    let (i, v) = uvarlong(i)?;
    Ok((i, ((v >> 1) as i64) ^ -((v & 1) as i64)))
}

/// Reads a length prefix: INT16/INT32 for classic encodings (`wide` picks INT32), or a compact
/// `uvarint(len + 1)`. `None` means null (a negative classic length or compact 0).
fn length_prefix(i: &[u8], flexible: bool, wide: bool) -> PResult<'_, Option<usize>> {
    if flexible {
        let (rest, n) = uvarint(i)?;
        Ok((rest, if n == 0 { None } else { Some(n as usize - 1) }))
    } else if wide {
        let (rest, n) = be_i32(i)?;
        match n {
            -1 => Ok((rest, None)),
            n if n < 0 => fail(i, WireErrorKind::InvalidLength(n as i64)),
            n => Ok((rest, Some(n as usize))),
        }
    } else {
        let (rest, n) = be_i16(i)?;
        match n {
            -1 => Ok((rest, None)),
            n if n < 0 => fail(i, WireErrorKind::InvalidLength(n as i64)),
            n => Ok((rest, Some(n as usize))),
        }
    }
}

/// Takes `len` bytes, failing (without allocating) when fewer remain.
#[inline]
fn take_checked(i: &[u8], len: usize) -> PResult<'_, &[u8]> {
    if i.len() < len {
        return fail(i, WireErrorKind::Truncated);
    }
    Ok((&i[len..], &i[..len]))
}

fn utf8(i: &[u8], raw: &[u8]) -> Result<String, nom::Err<WireError>> {
    std::str::from_utf8(raw)
        .map(str::to_owned)
        .map_err(|_| nom::Err::Error(WireError::new(i, WireErrorKind::InvalidUtf8)))
}

/// NULLABLE_STRING or COMPACT_NULLABLE_STRING.
pub fn nullable_string(flexible: bool) -> impl Fn(&[u8]) -> PResult<'_, Option<String>> {
    move |i| {
        let (rest, len) = length_prefix(i, flexible, false)?;
        match len {
            None => Ok((rest, None)),
            Some(len) => {
                let (rest, raw) = take_checked(rest, len)?;
                Ok((rest, Some(utf8(i, raw)?)))
            }
        }
    }
}

/// STRING or COMPACT_STRING (null is an error).
pub fn string(flexible: bool) -> impl Fn(&[u8]) -> PResult<'_, String> {
    move |i| {
        let (rest, s) = nullable_string(flexible)(i)?;
        match s {
            Some(s) => Ok((rest, s)),
            None => fail(i, WireErrorKind::UnexpectedNull),
        }
    }
}

/// NULLABLE_BYTES or COMPACT_NULLABLE_BYTES, borrowed from the input.
pub fn nullable_bytes(flexible: bool) -> impl Fn(&[u8]) -> PResult<'_, Option<&[u8]>> {
    move |i| {
        let (rest, len) = length_prefix(i, flexible, true)?;
        match len {
            None => Ok((rest, None)),
            Some(len) => {
                let (rest, raw) = take_checked(rest, len)?;
                Ok((rest, Some(raw)))
            }
        }
    }
}

/// BYTES or COMPACT_BYTES, borrowed from the input (null is an error).
pub fn bytes(flexible: bool) -> impl Fn(&[u8]) -> PResult<'_, &[u8]> {
    move |i| {
        let (rest, b) = nullable_bytes(flexible)(i)?;
        match b {
            Some(b) => Ok((rest, b)),
            None => fail(i, WireErrorKind::UnexpectedNull),
        }
    }
}

/// The fewest bytes a STRING or NULLABLE_STRING takes on the wire (its length prefix: INT16, or
/// one byte of compact length when `flexible`); for the `min_size` of [`array()`] elements.
pub const fn min_string_size(flexible: bool) -> usize {
    if flexible {
        1
    } else {
        2
    }
}

/// The fewest bytes an ARRAY takes on the wire (its length prefix: INT32, or one byte of compact
/// length when `flexible`); for the `min_size` of [`array()`] elements that hold arrays.
pub const fn min_array_size(flexible: bool) -> usize {
    if flexible {
        1
    } else {
        4
    }
}

/// The fewest bytes a tagged-field section takes on the wire: one (an empty section) when
/// `flexible`, none otherwise.
pub const fn min_tags_size(flexible: bool) -> usize {
    flexible as usize
}

/// At most this many bytes of elements are reserved before any element is parsed: a claimed
/// length costs nothing more until its elements arrive.
const INITIAL_RESERVATION: usize = 4096;

/// How many elements of `O` an array reserves room for up front (at least one).
fn initial_capacity<O>(claimed: usize) -> usize {
    let fit = INITIAL_RESERVATION / std::mem::size_of::<O>().max(1);
    claimed.min(fit.max(1))
}

/// NULLABLE ARRAY or COMPACT_NULLABLE_ARRAY of elements parsed by `elem`, each of which takes at
/// least `min_size` bytes on the wire (at every version the caller parses: never more than the
/// smallest element `elem` accepts, or valid arrays are refused).
///
/// A claimed length that the bytes left cannot hold at `min_size` bytes per element is an
/// error before anything is allocated; otherwise at most 4 KiB of elements are reserved, and
/// the vector doubles as elements parse, never past the claimed length. What it holds is then
/// bounded by the bytes that encoded it: at most `size_of::<O>() / min_size` times their length.
pub fn nullable_array<'a, O>(
    flexible: bool,
    min_size: usize,
    mut elem: impl FnMut(&'a [u8]) -> PResult<'a, O>,
) -> impl FnMut(&'a [u8]) -> PResult<'a, Option<Vec<O>>> {
    let min_size = min_size.max(1);
    move |i: &'a [u8]| {
        let (mut rest, len) = length_prefix(i, flexible, true)?;
        let Some(len) = len else {
            return Ok((rest, None));
        };
        if len.saturating_mul(min_size) > rest.len() {
            return fail(i, WireErrorKind::InvalidLength(len as i64));
        }
        let mut out = Vec::with_capacity(initial_capacity::<O>(len));
        for _ in 0..len {
            let (r, v) = elem(rest)?;
            rest = r;
            if out.len() == out.capacity() {
                // Double, but never past the claim: a whole array ends with no slack.
                out.reserve_exact(out.len().max(1).min(len - out.len()));
            }
            out.push(v);
        }
        Ok((rest, Some(out)))
    }
}

/// ARRAY or COMPACT_ARRAY of elements of at least `min_size` bytes (see [`nullable_array`]); a
/// null array reads as empty (Kafka's generated code does the same for non-nullable arrays sent
/// as null by lenient peers).
pub fn array<'a, O>(
    flexible: bool,
    min_size: usize,
    elem: impl FnMut(&'a [u8]) -> PResult<'a, O>,
) -> impl FnMut(&'a [u8]) -> PResult<'a, Vec<O>> {
    let mut inner = nullable_array(flexible, min_size, elem);
    move |i| {
        let (rest, v) = inner(i)?;
        Ok((rest, v.unwrap_or_default()))
    }
}

/// Reads a tagged-field section and hands each `(tag, value bytes)` to `on_tag`, which parses
/// the tags it knows and ignores the rest. Does nothing when `flexible` is false.
pub fn tagged_fields<'a>(
    i: &'a [u8],
    flexible: bool,
    mut on_tag: impl FnMut(u32, &'a [u8]) -> Result<(), nom::Err<WireError>>,
) -> PResult<'a, ()> {
    if !flexible {
        return Ok((i, ()));
    }
    let (mut rest, count) = uvarint(i)?;
    if count as usize > rest.len() {
        return fail(i, WireErrorKind::InvalidLength(count as i64));
    }
    for _ in 0..count {
        let (r, tag) = uvarint(rest)?;
        let (r, size) = uvarint(r)?;
        let (r, data) = take_checked(r, size as usize)?;
        on_tag(tag, data)?;
        rest = r;
    }
    Ok((rest, ()))
}

/// Skips a tagged-field section entirely (all tags unknown to the caller).
pub fn skip_tags(i: &[u8], flexible: bool) -> PResult<'_, ()> {
    tagged_fields(i, flexible, |_, _| Ok(()))
}

/// Parses a whole value with `p`, requiring the parser to consume `data` entirely; used for the
/// contents of a known tagged field.
pub fn parse_tag_value<'a, O>(
    data: &'a [u8],
    mut p: impl FnMut(&'a [u8]) -> PResult<'a, O>,
) -> Result<O, nom::Err<WireError>> {
    let (_rest, v) = p(data)?;
    Ok(v)
}

/// Lets nom combinators from the crate be used with the closures above.
pub fn run<'a, O>(
    mut p: impl Parser<&'a [u8], Output = O, Error = WireError>,
    i: &'a [u8],
) -> PResult<'a, O> {
    p.parse(i)
}

#[cfg(test)]
mod tests;
