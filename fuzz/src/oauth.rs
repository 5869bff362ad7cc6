//! OAUTHBEARER (RFC 7628): the client's initial response for any token and extensions, and
//! what the client makes of the broker's messages; and, through the hostile broker, the
//! producer's handling of tokens (lifetimes from zero to `Duration::MAX`, refused tokens,
//! session lifetimes) on real connections.
//!
//! Input: byte 0 even: the mechanism alone, `[_] [token len][token] [n ext] ([key len][key]
//! [value len][value])* [server messages: ([len][bytes])*]`. Byte 0 odd: a `hostile_broker`
//! run (see [`crate::hostile`]) whose producer authenticates with OAUTHBEARER, from the rest
//! of the input.
//!
//! Checked: the initial response is `n,,` `\x01auth=Bearer <token>\x01` then `key=value\x01`
//! per extension and a closing `\x01`, and reads back as exactly the token and extensions
//! given: a token or extension that would change the message's structure (a `\x01` inside, a
//! key with `=` or that is not RFC 7628's `1*ALPHA`) must be refused with a typed error, not
//! sent. The broker's messages: empty means success; the first non-empty one is an error
//! challenge, answered with a lone `\x01`; a second one fails the exchange.

use std::time::Duration;

use producer_core::sasl::fuzzing::Client;
use producer_core::{Mechanism, OAuthToken};

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }

    fn chunk(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.byte()? % 64).min(self.0.len());
        let (c, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(c)
    }

    fn string(&mut self) -> Option<String> {
        Some(String::from_utf8_lossy(self.chunk()?).into_owned())
    }
}

/// RFC 7628 `key`: `1*(ALPHA)`.
fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphabetic())
}

/// RFC 7628 `value`: `*(VCHAR / SP / HTAB / CR / LF)`.
fn valid_value(v: &str) -> bool {
    v.bytes()
        .all(|b| (0x21..=0x7e).contains(&b) || matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// RFC 6750 `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn valid_token(t: &str) -> bool {
    let body = t.trim_end_matches('=');
    !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b))
}

/// Reads an initial response back: the token and the extensions, or `None` when it is not
/// RFC 7628's `gs2-header kvsep *kvpair kvsep` with exactly one `auth=Bearer`.
fn parse(message: &[u8]) -> Option<(String, Vec<(String, String)>)> {
    let text = std::str::from_utf8(message).ok()?;
    let rest = text.strip_prefix("n,,\u{1}")?;
    let body = rest.strip_suffix("\u{1}\u{1}")?;
    let mut token = None;
    let mut extensions = Vec::new();
    for pair in body.split('\u{1}') {
        let (k, v) = pair.split_once('=')?;
        if k == "auth" {
            if token.is_some() {
                return None;
            }
            token = Some(v.strip_prefix("Bearer ")?.to_string());
        } else {
            extensions.push((k.to_string(), v.to_string()));
        }
    }
    Some((token?, extensions))
}

/// Runs one input; panics when the client breaks a rule.
pub fn run(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    if selector & 1 == 1 {
        crate::hostile::run_oauth(rest);
        return;
    }
    let mut r = Reader(rest);
    let Some(value) = r.string() else { return };
    let mut token = OAuthToken::new(value.clone(), Duration::from_secs(60));
    let n = r.byte().unwrap_or(0) % 4;
    for _ in 0..n {
        let (Some(k), Some(v)) = (r.string(), r.string()) else {
            break;
        };
        token.extensions.push((k, v));
    }
    let well_formed = valid_token(&value)
        && token
            .extensions
            .iter()
            .all(|(k, v)| valid_key(k) && k != "auth" && valid_value(v));
    let (mut client, first) =
        match Client::start(Mechanism::OAuthBearer, "", "", Some(&token), [0; 32]) {
            Ok(started) => started,
            Err(e) => {
                assert!(!well_formed, "a well-formed token was refused: {e}");
                return;
            }
        };
    match parse(&first) {
        Some((t, ext)) if t == value && ext == token.extensions => {}
        parsed => panic!(
            "the initial response does not read back as the token and extensions given \
             (token {value:?}, extensions {:?}): {:?} reads as {parsed:?}",
            token.extensions,
            String::from_utf8_lossy(&first)
        ),
    }
    // The broker's messages.
    let mut challenged = false;
    while let Some(message) = r.chunk() {
        let empty = message.is_empty();
        match client.step(message) {
            Ok(None) => {
                assert!(empty, "a non-empty broker message was taken as success");
                return;
            }
            Ok(Some(reply)) => {
                assert!(
                    !empty && !challenged,
                    "the client answered twice or an empty message"
                );
                assert_eq!(
                    reply,
                    [1],
                    "an error challenge is answered with a lone \\x01"
                );
                challenged = true;
            }
            Err(_) => {
                assert!(
                    !empty && challenged,
                    "the exchange failed on the first challenge or on success"
                );
                return;
            }
        }
    }
}
