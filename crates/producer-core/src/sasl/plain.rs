//! PLAIN (RFC 4616): one token, `authzid NUL authcid NUL passwd`, with an empty authzid as
//! Kafka's client sends it.

use super::{Secret, SecretBytes};

/// The PLAIN token for `username` and `password` (it holds the password: wiped when dropped).
pub(super) fn token(username: &str, password: &Secret) -> SecretBytes {
    let mut t = SecretBytes::with_capacity(2 + username.len() + password.expose().len());
    t.push(0);
    t.extend(username.as_bytes());
    t.push(0);
    t.extend(password.expose().as_bytes());
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_4616_layout_with_empty_authzid() {
        assert_eq!(
            token("tim", &Secret::new("tanstaaftanstaaf")).as_slice(),
            b"\0tim\0tanstaaftanstaaf"
        );
    }
}
