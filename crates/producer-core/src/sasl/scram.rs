//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), client side, as Kafka speaks them:
//! no channel binding (`n,,`), the username escaped, the password used as UTF-8 without SASLprep
//! (as Kafka's own client does), iteration counts within Kafka's 4096-16384, and the server's
//! signature verified before the exchange counts as done.
//!
//! The primitives (HMAC, SHA-2, PBKDF2, base64) are the RustCrypto and `base64` crates'.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256, Sha512};
use zeroize::{Zeroize, Zeroizing};

use super::{AuthError, Secret, SecretBytes, Step};

/// Kafka's bounds on SCRAM iterations (`ScramMechanism` min and max): a broker asking for
/// fewer is refused, and so is one asking for more (the client would spend seconds hashing).
const MIN_ITERATIONS: u32 = 4096;
const MAX_ITERATIONS: u32 = 16384;

/// The hash of the mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hash {
    Sha256,
    Sha512,
}

/// The keys derived from the password (RFC 5802's SaltedPassword, ClientKey, StoredKey,
/// ServerKey) and the values computed from them live in buffers wiped when dropped. (The hash
/// crates' own working state, on the stack while they run, is not wiped: the RustCrypto 0.10
/// crates do not offer it.)
impl Hash {
    fn hmac(self, key: &[u8], parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]]) -> Zeroizing<Vec<u8>> {
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes keys of any length");
            for p in parts {
                mac.update(p);
            }
            let mut out = mac.finalize().into_bytes();
            let wiped = Zeroizing::new(out.to_vec());
            out.as_mut_slice().zeroize();
            wiped
        }
        match self {
            Hash::Sha256 => run::<Hmac<Sha256>>(key, parts),
            Hash::Sha512 => run::<Hmac<Sha512>>(key, parts),
        }
    }

    /// Whether `tag` is the HMAC of `data` under `key`, compared in constant time (by the
    /// `hmac` crate's `verify_slice`).
    fn verify_hmac(self, key: &[u8], data: &[u8], tag: &[u8]) -> bool {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], data: &[u8], tag: &[u8]) -> bool {
            let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(key)
                .expect("HMAC takes keys of any length");
            mac.update(data);
            mac.verify_slice(tag).is_ok()
        }
        match self {
            Hash::Sha256 => run::<Hmac<Sha256>>(key, data, tag),
            Hash::Sha512 => run::<Hmac<Sha512>>(key, data, tag),
        }
    }

    fn digest(self, data: &[u8]) -> Zeroizing<Vec<u8>> {
        fn run<D: Digest>(data: &[u8]) -> Zeroizing<Vec<u8>> {
            let mut out = D::digest(data);
            let wiped = Zeroizing::new(out.to_vec());
            out.as_mut_slice().zeroize();
            wiped
        }
        match self {
            Hash::Sha256 => run::<Sha256>(data),
            Hash::Sha512 => run::<Sha512>(data),
        }
    }

    /// The output length of the hash in bytes.
    fn len(self) -> usize {
        match self {
            Hash::Sha256 => 32,
            Hash::Sha512 => 64,
        }
    }

    fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(vec![0u8; self.len()]);
        match self {
            Hash::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            Hash::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }
}

/// Client nonces: unpredictable and never repeated. Derived from a 32-byte secret with
/// HMAC-SHA-256 over a counter, so a producer seeded for a test is reproducible and one seeded
/// from the operating system is not predictable. The secret is wiped when dropped.
#[derive(Clone)]
pub(crate) struct NonceSource {
    key: [u8; 32],
    counter: u64,
}

impl Drop for NonceSource {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

impl std::fmt::Debug for NonceSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NonceSource")
            .field("counter", &self.counter)
            .finish_non_exhaustive()
    }
}

impl NonceSource {
    pub(crate) fn new(key: [u8; 32]) -> Self {
        NonceSource { key, counter: 0 }
    }

    /// The next nonce: 32 printable characters (URL-safe base64, which has no `,`).
    pub(crate) fn next_nonce(&mut self) -> String {
        self.counter += 1;
        let mac = Hash::Sha256.hmac(&self.key, &[b"scram nonce", &self.counter.to_be_bytes()]);
        URL_SAFE_NO_PAD.encode(&mac[..24])
    }
}

/// Where the exchange stands. (No `Debug`: the server key is secret; [`ScramClient`]'s
/// `Debug` names the state only.)
enum State {
    /// The client-first message was sent; waiting for the server-first.
    SentFirst {
        client_first_bare: String,
    },
    /// The client-final was sent; waiting for the server's signature, the HMAC of
    /// `auth_message` under `server_key`.
    SentFinal {
        server_key: Zeroizing<Vec<u8>>,
        auth_message: String,
    },
    Done,
}

/// One SCRAM exchange.
pub(crate) struct ScramClient {
    hash: Hash,
    password: Secret,
    nonce: String,
    state: State,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("hash", &self.hash)
            .field(
                "state",
                &format_args!(
                    "{}",
                    match self.state {
                        State::SentFirst { .. } => "sent first",
                        State::SentFinal { .. } => "sent final",
                        State::Done => "done",
                    }
                ),
            )
            .finish_non_exhaustive()
    }
}

/// The length of the padded base64 encoding of `n` bytes.
fn base64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// `saslname` of RFC 5802: `=` and `,` escaped.
fn escape_username(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

impl ScramClient {
    /// Starts an exchange: returns the client and its client-first message.
    pub(super) fn start(
        hash: Hash,
        username: &str,
        password: &Secret,
        nonce: String,
    ) -> (ScramClient, SecretBytes) {
        let client_first_bare = format!("n={},r={}", escape_username(username), nonce);
        // The client-first message holds no secret; it goes out as the other tokens do.
        let mut first = SecretBytes::with_capacity(3 + client_first_bare.len());
        first.extend(b"n,,");
        first.extend(client_first_bare.as_bytes());
        (
            ScramClient {
                hash,
                password: password.clone(),
                nonce,
                state: State::SentFirst { client_first_bare },
            },
            first,
        )
    }

    /// The broker's next message: answers the server-first with the client-final, and checks
    /// the server-final's signature.
    pub(super) fn step(&mut self, server: &[u8]) -> Result<Step, AuthError> {
        let server = std::str::from_utf8(server)
            .map_err(|_| AuthError::Scram("the broker's message is not UTF-8".into()))?;
        match std::mem::replace(&mut self.state, State::Done) {
            State::SentFirst { client_first_bare } => {
                let (final_message, server_key, auth_message) =
                    self.client_final(&client_first_bare, server)?;
                self.state = State::SentFinal {
                    server_key,
                    auth_message,
                };
                Ok(Step::Send(final_message))
            }
            State::SentFinal {
                server_key,
                auth_message,
            } => {
                let attrs = attributes(server)?;
                if let Some(e) = lookup(&attrs, 'e') {
                    return Err(AuthError::Scram(format!("the broker says: {e}")));
                }
                let v = lookup(&attrs, 'v')
                    .ok_or_else(|| AuthError::Scram("no server signature (v=)".into()))?;
                let v = STANDARD
                    .decode(v)
                    .map_err(|_| AuthError::Scram("server signature is not base64".into()))?;
                if !self
                    .hash
                    .verify_hmac(&server_key, auth_message.as_bytes(), &v)
                {
                    return Err(AuthError::BadServerSignature);
                }
                Ok(Step::Done)
            }
            State::Done => Err(AuthError::Scram(
                "a message after the exchange ended".into(),
            )),
        }
    }

    /// The client-final message for the server-first `server`, and what the server signature
    /// is checked with (the server key and the auth message).
    fn client_final(
        &self,
        client_first_bare: &str,
        server_first: &str,
    ) -> Result<(SecretBytes, Zeroizing<Vec<u8>>, String), AuthError> {
        let attrs = attributes(server_first)?;
        if lookup(&attrs, 'm').is_some() {
            return Err(AuthError::Scram(
                "the broker requires an unknown extension (m=)".into(),
            ));
        }
        let nonce = lookup(&attrs, 'r').ok_or_else(|| AuthError::Scram("no nonce (r=)".into()))?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err(AuthError::Scram(
                "the broker's nonce does not extend ours".into(),
            ));
        }
        let salt = lookup(&attrs, 's').ok_or_else(|| AuthError::Scram("no salt (s=)".into()))?;
        let salt = STANDARD
            .decode(salt)
            .map_err(|_| AuthError::Scram("salt is not base64".into()))?;
        let iterations: u32 = lookup(&attrs, 'i')
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| AuthError::Scram("no iteration count (i=)".into()))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(AuthError::Scram(format!(
                "iteration count {iterations} outside Kafka's {MIN_ITERATIONS}-{MAX_ITERATIONS}"
            )));
        }
        let h = self.hash;
        let salted = h.salted_password(self.password.expose().as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, &[b"Client Key"]);
        let stored_key = h.digest(&client_key);
        // c=biws is base64("n,,"): no channel binding, no authzid.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let client_signature = h.hmac(&stored_key, &[auth_message.as_bytes()]);
        let proof: Zeroizing<Vec<u8>> = Zeroizing::new(
            client_key
                .iter()
                .zip(client_signature.iter())
                .map(|(k, s)| k ^ s)
                .collect(),
        );
        let server_key = h.hmac(&salted, &[b"Server Key"]);
        let mut proof_b64 = Zeroizing::new(String::with_capacity(base64_len(proof.len())));
        STANDARD.encode_string(&*proof, &mut proof_b64);
        let mut message = SecretBytes::with_capacity(without_proof.len() + 3 + proof_b64.len());
        message.extend(without_proof.as_bytes());
        message.extend(b",p=");
        message.extend(proof_b64.as_bytes());
        Ok((message, server_key, auth_message))
    }
}

/// The `a=value` attributes of a SCRAM message, in order.
fn attributes(message: &str) -> Result<Vec<(char, &str)>, AuthError> {
    message
        .split(',')
        .map(|part| {
            let mut chars = part.chars();
            match (chars.next(), chars.next()) {
                (Some(name), Some('=')) if name.is_ascii_alphabetic() => Ok((name, &part[2..])),
                _ => Err(AuthError::Scram(format!("malformed attribute {part:?}"))),
            }
        })
        .collect()
}

fn lookup<'a>(attrs: &[(char, &'a str)], name: char) -> Option<&'a str> {
    attrs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: the SCRAM-SHA-256 example exchange, byte for byte.
    #[test]
    fn rfc_7677_example_exchange() {
        let (mut c, first) = ScramClient::start(
            Hash::Sha256,
            "user",
            &Secret::new("pencil"),
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(first.as_slice(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first =
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let Step::Send(final_message) = c.step(server_first).unwrap() else {
            panic!("expected the client-final");
        };
        assert_eq!(
            std::str::from_utf8(final_message.as_slice()).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        assert_eq!(
            c.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .unwrap(),
            Step::Done
        );
    }

    fn after_first(hash: Hash) -> ScramClient {
        let (mut c, _) = ScramClient::start(hash, "user", &Secret::new("pencil"), "abc".into());
        c.step(b"r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
            .unwrap();
        c
    }

    #[test]
    fn a_wrong_server_signature_fails() {
        let mut c = after_first(Hash::Sha512);
        assert_eq!(
            c.step(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
                .unwrap_err(),
            AuthError::BadServerSignature
        );
    }

    #[test]
    fn server_errors_and_malformed_messages_are_typed() {
        let mut c = after_first(Hash::Sha256);
        assert!(
            matches!(c.step(b"e=invalid-proof"), Err(AuthError::Scram(m)) if m.contains("invalid-proof"))
        );
        for bad in [
            &b"r=xyz,s=AAAA,i=4096"[..],     // nonce does not extend ours
            b"r=abc,s=AAAA,i=4096",          // nonce not extended at all
            b"r=abcdef,s=AAAA,i=1000",       // too few iterations
            b"r=abcdef,s=AAAA,i=100000000",  // too many
            b"r=abcdef,s=!!!,i=4096",        // salt not base64
            b"m=ext,r=abcdef,s=AAAA,i=4096", // mandatory extension
            b"r=abcdef,s=AAAA",              // no iterations
            b"garbage",
            b"\xff\xfe",
        ] {
            let (mut c, _) = ScramClient::start(Hash::Sha256, "u", &Secret::new("p"), "abc".into());
            assert!(
                c.step(bad).is_err(),
                "{:?} accepted",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn usernames_are_escaped() {
        let (_, first) = ScramClient::start(Hash::Sha256, "a=b,c", &Secret::new("p"), "n".into());
        assert_eq!(first.as_slice(), b"n,,n=a=3Db=2Cc,r=n");
    }

    #[test]
    fn nonces_are_reproducible_from_their_seed_and_never_repeat() {
        let mut a = NonceSource::new([7; 32]);
        let mut b = NonceSource::new([7; 32]);
        let first = a.next_nonce();
        assert_eq!(first, b.next_nonce());
        assert_ne!(first, a.next_nonce());
        assert_ne!(first, NonceSource::new([8; 32]).next_nonce());
        assert_eq!(first.len(), 32);
        assert!(!first.contains(','));
    }

    #[test]
    fn the_password_stays_out_of_debug() {
        let (c, _) = ScramClient::start(Hash::Sha256, "u", &Secret::new("hunter2"), "n".into());
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
