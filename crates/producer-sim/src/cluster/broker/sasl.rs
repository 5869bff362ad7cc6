//! SaslHandshake and SaslAuthenticate, broker side, as Kafka's `SaslServerAuthenticator`:
//! the handshake picks an enabled mechanism; PLAIN checks the credential store; SCRAM
//! (RFC 5802) answers the client-first with its own nonce, salt and iterations and checks the
//! client's proof against the stored key, returning the server signature; OAUTHBEARER accepts
//! the configured tokens (an error challenge otherwise). A failure is answered with
//! SASL_AUTHENTICATION_FAILED, then the connection closes. A session may carry a lifetime
//! (`connections.max.reauth.ms`): a request other than re-authentication after it ends closes
//! the connection; re-authentication must keep the principal.

use std::time::Instant;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use sha2::{Digest, Sha256, Sha512};

use super::code;
use crate::cluster::SimCluster;

/// A connection's SASL session, broker side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum SaslSession {
    /// Not authenticated.
    #[default]
    None,
    /// SaslHandshake chose `mechanism`; `principal` is the one being re-authenticated, if any.
    Handshaken {
        mechanism: String,
        principal: Option<String>,
    },
    /// SCRAM: the server-first was sent.
    ScramFirst {
        hash: ScramHash,
        user: String,
        auth_message_start: String,
        nonce: String,
        stored_key: Vec<u8>,
        server_key: Vec<u8>,
        principal: Option<String>,
    },
    /// OAUTHBEARER: an error challenge was sent; the client's acknowledgement fails it.
    OAuthRefused,
    /// Authenticated as `principal`, until `expires` if the session has a lifetime.
    Authenticated {
        principal: String,
        expires: Option<Instant>,
    },
}

/// The hash of a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    fn of(mechanism: &str) -> Option<ScramHash> {
        match mechanism {
            "SCRAM-SHA-256" => Some(ScramHash::Sha256),
            "SCRAM-SHA-512" => Some(ScramHash::Sha512),
            _ => None,
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut m = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
            ScramHash::Sha512 => {
                let mut m = <Hmac<Sha512> as Mac>::new_from_slice(key).expect("any key length");
                m.update(data);
                m.finalize().into_bytes().to_vec()
            }
        }
    }

    fn h(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// The stored and server keys of a credential (what Kafka's credential store keeps).
    fn credential(self, password: &str, salt: &[u8], iterations: u32) -> (Vec<u8>, Vec<u8>) {
        let salted = match self {
            ScramHash::Sha256 => {
                pbkdf2::pbkdf2_hmac_array::<Sha256, 32>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
            ScramHash::Sha512 => {
                pbkdf2::pbkdf2_hmac_array::<Sha512, 64>(password.as_bytes(), salt, iterations)
                    .to_vec()
            }
        };
        let stored = self.h(&self.hmac(&salted, b"Client Key"));
        let server = self.hmac(&salted, b"Server Key");
        (stored, server)
    }
}

/// What handling a SASL request leads to.
pub(crate) enum SaslOutcome {
    /// Answer, and keep the connection.
    Continue,
    /// Answer, then close the connection (a failed authentication).
    Fail,
}

impl SimCluster {
    /// Whether a request of `api_key` may be served on `conn` now; `Err` says why not (the
    /// connection then closes, as Kafka closes it).
    pub(super) fn sasl_gate(&self, conn: u64, api_key: i16, at: Instant) -> Result<(), String> {
        if self.cfg.sasl.is_none()
            || [
                crate::API_API_VERSIONS,
                crate::API_SASL_HANDSHAKE,
                crate::API_SASL_AUTHENTICATE,
            ]
            .contains(&api_key)
        {
            return Ok(());
        }
        let session = self.conns.get(&conn).map(|c| &c.sasl);
        match session {
            Some(SaslSession::Authenticated { expires, .. }) => match expires {
                Some(end) if *end <= at => {
                    Err(format!("api {api_key} after the SASL session expired"))
                }
                _ => Ok(()),
            },
            _ => Err(format!(
                "api {api_key} before SASL authentication completed"
            )),
        }
    }

    pub(super) fn sasl_handshake(
        &mut self,
        conn: u64,
        req: SaslHandshakeRequest,
    ) -> SaslHandshakeResponse {
        let mut resp = SaslHandshakeResponse::default();
        let Some(sasl) = self.cfg.sasl.as_ref() else {
            resp.error_code = code::ILLEGAL_SASL_STATE;
            return resp;
        };
        resp.mechanisms = sasl
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_string(m.clone()))
            .collect();
        let mechanism = req.mechanism.to_string();
        if !sasl.mechanisms.contains(&mechanism) {
            resp.error_code = code::UNSUPPORTED_SASL_MECHANISM;
            return resp;
        }
        let Some(c) = self.conns.get_mut(&conn) else {
            return resp;
        };
        let principal = match &c.sasl {
            SaslSession::None => None,
            SaslSession::Authenticated { principal, .. } => Some(principal.clone()),
            _ => {
                resp.error_code = code::ILLEGAL_SASL_STATE;
                return resp;
            }
        };
        c.sasl = SaslSession::Handshaken {
            mechanism,
            principal,
        };
        resp
    }

    pub(super) fn sasl_authenticate(
        &mut self,
        conn: u64,
        version: i16,
        req: SaslAuthenticateRequest,
        now: Instant,
    ) -> (SaslAuthenticateResponse, SaslOutcome) {
        let state = self
            .conns
            .get(&conn)
            .map(|c| c.sasl.clone())
            .unwrap_or_default();
        let token = req.auth_bytes.to_vec();
        let step = match state {
            SaslSession::Handshaken {
                mechanism,
                principal,
            } => match mechanism.as_str() {
                "PLAIN" => self.plain(&token).map(|user| (Next::Done(user), principal)),
                "OAUTHBEARER" => self.oauth(&token).map(|n| (n, principal)),
                m => match ScramHash::of(m) {
                    Some(hash) => self.scram_first(hash, &token).map(|n| (n, principal)),
                    None => Err("no such mechanism".to_string()),
                },
            },
            SaslSession::ScramFirst {
                hash,
                user,
                auth_message_start,
                nonce,
                stored_key,
                server_key,
                principal,
            } => scram_final(
                hash,
                &token,
                &auth_message_start,
                &nonce,
                &stored_key,
                &server_key,
            )
            .map(|sig| (Next::DoneWith(user, sig), principal)),
            SaslSession::OAuthRefused => Err("the OAUTHBEARER token was refused".into()),
            SaslSession::None | SaslSession::Authenticated { .. } => {
                let mut resp = SaslAuthenticateResponse::default();
                resp.error_code = code::ILLEGAL_SASL_STATE;
                resp.error_message = Some(StrBytes::from_static_str(
                    "SaslAuthenticate without a SaslHandshake",
                ));
                return (resp, SaslOutcome::Fail);
            }
        };
        let mut resp = SaslAuthenticateResponse::default();
        let failed = |msg: String| {
            let mut resp = SaslAuthenticateResponse::default();
            resp.error_code = code::SASL_AUTHENTICATION_FAILED;
            resp.error_message = Some(StrBytes::from_string(format!(
                "Authentication failed: {msg}"
            )));
            (resp, SaslOutcome::Fail)
        };
        let (next, principal) = match step {
            Ok(s) => s,
            Err(msg) => return failed(msg),
        };
        let lifetime = self.cfg.sasl.as_ref().and_then(|s| s.session_lifetime);
        let new_state = match next {
            Next::Challenge(bytes, mut state) => {
                if let SaslSession::ScramFirst { principal: p, .. } = &mut state {
                    p.clone_from(&principal);
                }
                resp.auth_bytes = bytes.into();
                state
            }
            Next::Done(user) | Next::DoneWith(user, _)
                if principal.as_ref().is_some_and(|p| *p != user) =>
            {
                return failed(format!(
                    "re-authentication as {user} instead of the session's principal"
                ));
            }
            Next::Done(user) => {
                self.session_started(&mut resp, version, lifetime);
                SaslSession::Authenticated {
                    principal: user,
                    expires: lifetime.map(|l| now + l),
                }
            }
            Next::DoneWith(user, server_final) => {
                resp.auth_bytes = server_final.into();
                self.session_started(&mut resp, version, lifetime);
                SaslSession::Authenticated {
                    principal: user,
                    expires: lifetime.map(|l| now + l),
                }
            }
        };
        if let Some(c) = self.conns.get_mut(&conn) {
            c.sasl = new_state;
        }
        (resp, SaslOutcome::Continue)
    }

    fn session_started(
        &self,
        resp: &mut SaslAuthenticateResponse,
        version: i16,
        lifetime: Option<std::time::Duration>,
    ) {
        if version >= 1 {
            resp.session_lifetime_ms = lifetime.map_or(0, |l| l.as_millis() as i64);
        }
    }

    fn password_of(&self, user: &str) -> Option<String> {
        let sasl = self.cfg.sasl.as_ref()?;
        sasl.users
            .iter()
            .find(|(u, _)| u == user)
            .map(|(_, p)| p.clone())
    }

    /// PLAIN: `authzid NUL user NUL password`, checked against the store.
    fn plain(&self, token: &[u8]) -> Result<String, String> {
        let parts: Vec<&[u8]> = token.split(|&b| b == 0).collect();
        let [authzid, user, password] = parts[..] else {
            return Err("malformed PLAIN token".into());
        };
        let user = std::str::from_utf8(user).map_err(|_| "user is not UTF-8")?;
        if !authzid.is_empty() && authzid != user.as_bytes() {
            return Err("authzid differs from the user".into());
        }
        match self.password_of(user) {
            Some(p) if p.as_bytes() == password => Ok(user.to_string()),
            _ => Err("Invalid username or password".into()),
        }
    }

    /// OAUTHBEARER: `n,,\x01auth=Bearer <token>\x01...\x01`; an unknown token gets an error
    /// challenge.
    fn oauth(&self, message: &[u8]) -> Result<Next, String> {
        let text = std::str::from_utf8(message).map_err(|_| "OAUTHBEARER message is not UTF-8")?;
        let rest = text
            .strip_prefix("n,,\x01")
            .ok_or("OAUTHBEARER message without a gs2 header")?;
        let token = rest
            .split('\x01')
            .find_map(|kv| kv.strip_prefix("auth=Bearer "))
            .ok_or("OAUTHBEARER message without auth=Bearer")?;
        let known = self
            .cfg
            .sasl
            .as_ref()
            .is_some_and(|s| s.oauth_tokens.iter().any(|t| t == token));
        if known {
            Ok(Next::Done(token.to_string()))
        } else {
            Ok(Next::Challenge(
                br#"{"status":"invalid_token"}"#.to_vec(),
                SaslSession::OAuthRefused,
            ))
        }
    }

    /// SCRAM client-first: `n,,n=<user>,r=<client nonce>` answered with the server-first.
    fn scram_first(&mut self, hash: ScramHash, message: &[u8]) -> Result<Next, String> {
        let text = std::str::from_utf8(message).map_err(|_| "client-first is not UTF-8")?;
        let bare = text
            .strip_prefix("n,,")
            .ok_or("client-first without the n,, gs2 header")?;
        let mut user = None;
        let mut client_nonce = None;
        for part in bare.split(',') {
            if let Some(u) = part.strip_prefix("n=") {
                user = Some(u.replace("=2C", ",").replace("=3D", "="));
            } else if let Some(r) = part.strip_prefix("r=") {
                client_nonce = Some(r.to_string());
            }
        }
        let (Some(user), Some(client_nonce)) = (user, client_nonce) else {
            return Err("client-first without n= or r=".into());
        };
        let password = self
            .password_of(&user)
            .ok_or_else(|| format!("unknown user {user}"))?;
        let iterations = self.cfg.sasl.as_ref().map_or(4096, |s| s.scram_iterations);
        // A salt per user, as a credential store keeps it.
        let salt = Sha256::digest(format!("salt:{user}").as_bytes())[..16].to_vec();
        let key = (hash, user.clone());
        let (stored_key, server_key) = match self.scram_credentials.get(&key) {
            Some(c) => c.clone(),
            None => {
                // Derived once per user and hash, as a credential store keeps them.
                let c = hash.credential(&password, &salt, iterations);
                self.scram_credentials.insert(key, c.clone());
                c
            }
        };
        let server_nonce = format!("{client_nonce}{:016x}", self.rng.next_u64());
        let server_first = format!(
            "r={server_nonce},s={},i={iterations}",
            STANDARD.encode(&salt)
        );
        let state = SaslSession::ScramFirst {
            hash,
            user,
            auth_message_start: format!("{bare},{server_first}"),
            nonce: server_nonce,
            stored_key,
            server_key,
            principal: None,
        };
        Ok(Next::Challenge(server_first.into_bytes(), state))
    }
}

/// What a SASL step leads to.
enum Next {
    /// Send these bytes and wait for the client's next token in this state.
    Challenge(Vec<u8>, SaslSession),
    /// Authenticated as this principal.
    Done(String),
    /// Authenticated as this principal, sending this final message.
    DoneWith(String, Vec<u8>),
}

/// SCRAM client-final `c=biws,r=<nonce>,p=<proof>`: verifies the proof against the stored key
/// and returns the server-final (`v=<server signature>`).
fn scram_final(
    hash: ScramHash,
    message: &[u8],
    auth_message_start: &str,
    nonce: &str,
    stored_key: &[u8],
    server_key: &[u8],
) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(message).map_err(|_| "client-final is not UTF-8")?;
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or("client-final without a proof")?;
    if without_proof != format!("c=biws,r={nonce}") {
        return Err("client-final with another nonce or channel binding".into());
    }
    let proof = STANDARD.decode(proof).map_err(|_| "proof is not base64")?;
    let auth_message = format!("{auth_message_start},{without_proof}");
    let client_signature = hash.hmac(stored_key, auth_message.as_bytes());
    if proof.len() != client_signature.len() {
        return Err("proof of the wrong length".into());
    }
    let client_key: Vec<u8> = proof
        .iter()
        .zip(&client_signature)
        .map(|(p, s)| p ^ s)
        .collect();
    if hash.h(&client_key) != stored_key {
        return Err(
            "Authentication failed during authentication due to invalid credentials".into(),
        );
    }
    let server_signature = hash.hmac(server_key, auth_message.as_bytes());
    Ok(format!("v={}", STANDARD.encode(server_signature)).into_bytes())
}
