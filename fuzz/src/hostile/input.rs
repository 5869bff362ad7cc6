//! The fuzz input, read as two streams: the operations (what the application and the network
//! do, in order) and the broker's values (what each answer says).
//!
//! Every read of an exhausted stream gives zero, and a zero selector means "the sane value":
//! an input of zeros is a well-behaved run, and the fuzzer makes an answer hostile one field at
//! a time.

use producer_core::ErrorCode;

/// A stream of bytes; reads past its end give zeros.
#[derive(Debug)]
pub(crate) struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }

    /// Whether every byte was read.
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub(crate) fn u8(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    pub(crate) fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    pub(crate) fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub(crate) fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }

    /// Up to `n` bytes (fewer at the end of the stream).
    pub(crate) fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.pos = self.pos.saturating_add(n);
        &self.data[start..end]
    }
}

/// Interesting 32-bit values: the boundaries a table index or a count runs into.
const I32_EDGES: [i32; 12] = [
    -1,
    i32::MAX,
    i32::MIN,
    10_000_000,
    1 << 20,
    65_536,
    1_000,
    0,
    1,
    -2,
    i32::MAX - 1,
    100_000,
];

/// Interesting 64-bit values (offsets, timestamps, lifetimes).
const I64_EDGES: [i64; 8] = [-1, i64::MAX, i64::MIN, 0, 1, -2, i64::MAX - 1, 1 << 40];

/// The broker's values: each field reads a selector byte; below [`HOSTILE`] (or at the end of
/// the stream) the field gets its sane value, otherwise the low bits pick a hostile one.
#[derive(Debug)]
pub(crate) struct Values<'a> {
    bytes: Bytes<'a>,
}

/// Selector bytes from here on make a field hostile (one in eight).
pub(crate) const HOSTILE: u8 = 0xE0;

impl<'a> Values<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Values {
            bytes: Bytes::new(data),
        }
    }

    /// A selector: `None` for the sane value, else the hostile variant (0..32).
    pub(crate) fn hostile(&mut self) -> Option<u8> {
        let s = self.bytes.u8();
        s.checked_sub(HOSTILE)
    }

    /// A raw byte (for counts and choices that have no "sane" reading).
    pub(crate) fn raw_u8(&mut self) -> u8 {
        self.bytes.u8()
    }

    pub(crate) fn raw_u16(&mut self) -> u16 {
        self.bytes.u16()
    }

    pub(crate) fn raw_bytes(&mut self, n: usize) -> &'a [u8] {
        self.bytes.take(n)
    }

    /// An `i32` field whose sane value is `sane`.
    pub(crate) fn i32(&mut self, sane: i32) -> i32 {
        match self.hostile() {
            None => sane,
            Some(k) if (k as usize) < I32_EDGES.len() => I32_EDGES[k as usize],
            Some(12) => sane.wrapping_add(1),
            Some(13) => sane.wrapping_sub(1),
            Some(14) => sane.wrapping_add(i32::from(self.bytes.u8())),
            Some(_) => self.bytes.u32() as i32,
        }
    }

    /// An `i64` field whose sane value is `sane`.
    pub(crate) fn i64(&mut self, sane: i64) -> i64 {
        match self.hostile() {
            None => sane,
            Some(k) if (k as usize) < I64_EDGES.len() => I64_EDGES[k as usize],
            Some(8) => sane.wrapping_add(1),
            Some(9) => sane.wrapping_sub(1),
            Some(_) => self.bytes.u64() as i64,
        }
    }

    /// An `i16` field whose sane value is `sane` (epochs, versions).
    pub(crate) fn i16(&mut self, sane: i16) -> i16 {
        match self.hostile() {
            None => sane,
            Some(0) => -1,
            Some(1) => i16::MAX,
            Some(2) => i16::MIN,
            Some(3) => sane.wrapping_add(1),
            Some(4) => sane.wrapping_sub(1),
            Some(5) => 0,
            Some(_) => self.bytes.u16() as i16,
        }
    }

    /// An error code whose sane value is `sane`: hostile ones are mostly the codes the
    /// producer knows (each with its own handling), sometimes any `i16`.
    pub(crate) fn error(&mut self, sane: i16) -> i16 {
        match self.hostile() {
            None => sane,
            Some(k) if k < 28 => {
                let i = usize::from(self.bytes.u8()) % ErrorCode::NAMED.len();
                ErrorCode::NAMED[i].0
            }
            Some(28) => -1,
            Some(29) => i16::MAX,
            Some(30) => i16::MIN,
            Some(_) => self.bytes.u16() as i16,
        }
    }

    /// A count whose sane value is `sane`; hostile counts stay small (the answer is encoded
    /// for real, so its size is what it claims).
    pub(crate) fn count(&mut self, sane: usize, max: usize) -> usize {
        match self.hostile() {
            None => sane,
            Some(0) => 0,
            Some(1) => sane + 1,
            Some(2) => sane.saturating_sub(1),
            Some(_) => usize::from(self.bytes.u8()) % (max + 1),
        }
    }

    /// A string whose sane value is `sane`: hostile ones are empty, another name, long, or
    /// not printable.
    pub(crate) fn string(&mut self, sane: &str) -> String {
        match self.hostile() {
            None => sane.to_string(),
            Some(0) => String::new(),
            Some(1) => format!("{sane}x"),
            Some(2) => "x".repeat(usize::from(self.bytes.u16()) % 5000),
            Some(3) => "\u{1}\u{0}=,;\n\u{7f}\u{fffd}".to_string(),
            Some(_) => {
                let n = usize::from(self.bytes.u8()) % 24;
                String::from_utf8_lossy(self.bytes.take(n)).into_owned()
            }
        }
    }

    /// A boolean whose sane value is `sane`.
    pub(crate) fn flag(&mut self, sane: bool) -> bool {
        match self.hostile() {
            None => sane,
            Some(_) => !sane,
        }
    }
}
