//! Where a sealed batch keeps its bytes: owned, or shared with the requests that carry them.

use bytes::Bytes;

/// A sealed batch's bytes: owned until a request first shares them, shared from then on.
/// Writing to shared bytes takes them back when nothing else holds them any more (the
/// request that carried them was written and dropped), and copies them when something does.
#[derive(Clone)]
pub(super) enum Storage {
    Owned(Vec<u8>),
    Shared(Bytes),
}

impl Storage {
    pub(super) fn as_slice(&self) -> &[u8] {
        match self {
            Storage::Owned(v) => v,
            Storage::Shared(b) => b,
        }
    }

    /// The bytes to change in place.
    pub(super) fn as_mut(&mut self) -> &mut Vec<u8> {
        if let Storage::Shared(b) = self {
            let vec = match std::mem::take(b).try_into_mut() {
                Ok(unique) => Vec::from(unique),
                // An earlier request still holds them (its connection has not written or
                // dropped it yet): this attempt gets its own copy.
                Err(shared) => shared.to_vec(),
            };
            *self = Storage::Owned(vec);
        }
        match self {
            Storage::Owned(v) => v,
            Storage::Shared(_) => unreachable!("made owned above"),
        }
    }

    /// The bytes as `Bytes` that share this storage (no copy).
    pub(super) fn share(&mut self) -> Bytes {
        match self {
            Storage::Shared(b) => b.clone(),
            Storage::Owned(v) => {
                let b = Bytes::from(std::mem::take(v));
                *self = Storage::Shared(b.clone());
                b
            }
        }
    }

    pub(super) fn into_bytes(self) -> Bytes {
        match self {
            Storage::Owned(v) => Bytes::from(v),
            Storage::Shared(b) => b,
        }
    }

    /// The buffer to reuse: empty if something still shares it.
    pub(super) fn into_vec(self) -> Vec<u8> {
        match self {
            Storage::Owned(v) => v,
            Storage::Shared(b) => b.try_into_mut().map(Vec::from).unwrap_or_default(),
        }
    }
}
