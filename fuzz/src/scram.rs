//! Full SCRAM exchanges (RFC 5802, RFC 7677) between the producer's client and an independent
//! server written here with the RustCrypto crates: client-first, server-first, client-final,
//! server-final. The input picks the credentials, the salt, the iterations and the server's
//! nonce, and whether each server message is the right one or one of a set of wrong ones.
//!
//! Input: `[flags] [user len][user] [password len][password] [salt len][salt] [iterations]
//! [nonce len][nonce] [rest: raw bytes for the raw mutations]`. Flags: bit 0 SHA-512, bits
//! 1-3 the server-first mutation ([`first_mutation`]), bits 4-6 the server-final mutation
//! ([`final_mutation`]), bit 7 a message after the end.
//!
//! Checked: the client-first is `n,,n=<saslname>,r=<nonce>` with the username escaped and
//! recoverable; on the right server-first the client-final is `c=biws,r=<nonce>,p=<proof>` and
//! the proof verifies against the password; on a wrong server-first the client refuses with a
//! typed error (it must not accept a nonce that does not extend its own, an iteration count
//! out of range, a mandatory extension); on the right server-final the exchange completes, on
//! a wrong one it fails; a message after the end fails. Never a panic.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use producer_core::sasl::fuzzing::Client;
use producer_core::{AuthError, Mechanism};
use sha2::{Digest, Sha256, Sha512};

fn hmac(sha512: bool, key: &[u8], data: &[u8]) -> Vec<u8> {
    if sha512 {
        let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("any key length");
        m.update(data);
        m.finalize().into_bytes().to_vec()
    } else {
        let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
        m.update(data);
        m.finalize().into_bytes().to_vec()
    }
}

fn hash(sha512: bool, data: &[u8]) -> Vec<u8> {
    if sha512 {
        Sha512::digest(data).to_vec()
    } else {
        Sha256::digest(data).to_vec()
    }
}

fn salted(sha512: bool, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
    if sha512 {
        pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password, salt, iterations).to_vec()
    } else {
        pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password, salt, iterations).to_vec()
    }
}

/// RFC 5802 `saslname` back to the username: `=2C` is `,`, `=3D` is `=`, any other `=` or a
/// raw `,` is malformed.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = name;
    while let Some(i) = rest.find(['=', ',']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if tail.starts_with("=2C") {
            out.push(',');
        } else if tail.starts_with("=3D") {
            out.push('=');
        } else {
            return None;
        }
        rest = &tail[3..];
    }
    out.push_str(rest);
    Some(out)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn chunk(&mut self) -> &'a [u8] {
        let n = usize::from(self.byte() % 32).min(self.0.len());
        let (c, rest) = self.0.split_at(n);
        self.0 = rest;
        c
    }
}

/// Server-first mutations (flags bits 1-3): 0 the right message; 1 raw bytes; 2 a nonce that
/// does not extend the client's; 3 an iteration count out of Kafka's range; 4 a mandatory
/// extension `m=`; 5 a salt that is not base64; 6 no iteration count; 7 an error `e=`.
fn first_mutation(kind: u8, right: &str, client_nonce: &str, raw: &[u8]) -> Vec<u8> {
    let parts: Vec<&str> = right.split(',').collect();
    match kind {
        1 => raw.to_vec(),
        2 => format!(
            "r={},{},{}",
            &client_nonce[..client_nonce.len() / 2],
            parts[1],
            parts[2]
        )
        .into_bytes(),
        3 => {
            let i = ["4095", "16385", "0", "99999999999", "-1", "4096.5"][raw.len() % 6];
            format!("{},{},i={i}", parts[0], parts[1]).into_bytes()
        }
        4 => format!("m=ext,{right}").into_bytes(),
        5 => format!("{},s=!!notbase64,{}", parts[0], parts[2]).into_bytes(),
        6 => format!("{},{}", parts[0], parts[1]).into_bytes(),
        7 => b"e=other-error".to_vec(),
        _ => right.as_bytes().to_vec(),
    }
}

/// Server-final mutations (flags bits 4-6): 0 the right signature; 1 raw bytes; 2 a signature
/// with one bit flipped; 3 an error `e=`; 4 a signature that is not base64; 5 a truncated
/// signature; 6 the right signature followed by an extension; 7 empty.
fn final_mutation(kind: u8, signature: &[u8], raw: &[u8]) -> (Vec<u8>, Option<bool>) {
    match kind {
        1 => (raw.to_vec(), None),
        2 => {
            let mut s = signature.to_vec();
            let at = raw.len() % s.len();
            s[at] ^= 1 << (raw.len() % 8);
            (
                format!("v={}", STANDARD.encode(s)).into_bytes(),
                Some(false),
            )
        }
        3 => (b"e=invalid-proof".to_vec(), Some(false)),
        4 => (b"v=***".to_vec(), Some(false)),
        5 => (
            format!("v={}", STANDARD.encode(&signature[..signature.len() / 2])).into_bytes(),
            Some(false),
        ),
        6 => (
            format!("v={},x=ext", STANDARD.encode(signature)).into_bytes(),
            None,
        ),
        7 => (Vec::new(), Some(false)),
        _ => (
            format!("v={}", STANDARD.encode(signature)).into_bytes(),
            Some(true),
        ),
    }
}

/// Runs one exchange; panics when the client breaks a rule.
pub fn run(data: &[u8]) {
    let mut r = Reader(data);
    let flags = r.byte();
    let sha512 = flags & 1 == 1;
    let user = String::from_utf8_lossy(r.chunk()).into_owned();
    let password = String::from_utf8_lossy(r.chunk()).into_owned();
    let salt = r.chunk().to_vec();
    // Kafka's range is 4096-16384; PBKDF2 costs its iterations twice per run, so stay low.
    let iterations = 4096 + u32::from(r.byte() % 4);
    let server_nonce = STANDARD.encode(r.chunk()).replace('=', "");
    let raw = r.0;
    let mechanism = if sha512 {
        Mechanism::ScramSha512
    } else {
        Mechanism::ScramSha256
    };

    // Client-first.
    let (mut client, first) = Client::start(mechanism, &user, &password, None, [flags; 32])
        .expect("SCRAM needs no token: starting never fails");
    let first = String::from_utf8(first).expect("the client-first message is UTF-8");
    let bare = first
        .strip_prefix("n,,")
        .unwrap_or_else(|| panic!("client-first without the gs2 header: {first:?}"));
    let (name_attr, nonce_attr) = bare
        .split_once(",r=")
        .unwrap_or_else(|| panic!("client-first without a nonce: {first:?}"));
    let saslname = name_attr
        .strip_prefix("n=")
        .unwrap_or_else(|| panic!("client-first without n=: {first:?}"));
    assert_eq!(
        unescape(saslname).as_deref(),
        Some(user.as_str()),
        "the username is not escaped as RFC 5802 saslname: {first:?}"
    );
    let client_nonce = nonce_attr;
    assert!(
        !client_nonce.is_empty()
            && client_nonce
                .bytes()
                .all(|b| (0x21..=0x7e).contains(&b) && b != b','),
        "the client nonce is not printable without ',': {first:?}"
    );

    // Server-first.
    let nonce = format!("{client_nonce}{server_nonce}x");
    let right_first = format!("r={nonce},s={},i={iterations}", STANDARD.encode(&salt));
    let first_kind = (flags >> 1) & 7;
    let server_first = first_mutation(first_kind, &right_first, client_nonce, raw);
    let answer = client.step(&server_first);
    if first_kind != 0 {
        match answer {
            Err(_) => return,
            Ok(_) if first_kind == 1 => return,
            Ok(m) => panic!(
                "the client accepted a wrong server-first ({}): {:?} -> {m:?}",
                first_kind,
                String::from_utf8_lossy(&server_first)
            ),
        }
    }
    let client_final = match answer {
        Ok(Some(m)) => String::from_utf8(m).expect("the client-final message is UTF-8"),
        other => panic!("the right server-first was answered with {other:?}"),
    };

    // Client-final: the proof, checked by the server's own computation.
    let (without_proof, proof) = client_final
        .rsplit_once(",p=")
        .unwrap_or_else(|| panic!("client-final without a proof: {client_final:?}"));
    assert_eq!(
        without_proof,
        format!("c=biws,r={nonce}"),
        "client-final must bind no channel and echo the full nonce"
    );
    let salted = salted(sha512, password.as_bytes(), &salt, iterations);
    let client_key = hmac(sha512, &salted, b"Client Key");
    let stored_key = hash(sha512, &client_key);
    let auth_message = format!("{bare},{right_first},{without_proof}");
    let client_signature = hmac(sha512, &stored_key, auth_message.as_bytes());
    let proof = STANDARD
        .decode(proof)
        .unwrap_or_else(|_| panic!("the proof is not base64: {client_final:?}"));
    let recovered: Vec<u8> = proof
        .iter()
        .zip(&client_signature)
        .map(|(p, s)| p ^ s)
        .collect();
    assert!(
        proof.len() == client_key.len() && hash(sha512, &recovered) == stored_key,
        "the client's proof does not verify against the password"
    );

    // Server-final.
    let server_key = hmac(sha512, &salted, b"Server Key");
    let signature = hmac(sha512, &server_key, auth_message.as_bytes());
    let (server_final, expect) = final_mutation((flags >> 4) & 7, &signature, raw);
    let result = client.step(&server_final);
    match (expect, &result) {
        (Some(true), Ok(None)) | (Some(false), Err(_)) | (None, _) => {}
        (Some(true), other) => panic!("the right server signature was refused: {other:?}"),
        (Some(false), Ok(m)) => panic!(
            "a wrong server-final was accepted: {:?} -> {m:?}",
            String::from_utf8_lossy(&server_final)
        ),
    }
    if let Err(AuthError::BadServerSignature) = result {
        assert!(expect != Some(true), "the right signature was called bad");
    }
    if flags & 0x80 != 0 {
        assert!(
            client.step(b"v=again").is_err(),
            "a message after the end of the exchange was accepted"
        );
    }
}
