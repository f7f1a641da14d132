//! Signing deliveries as the Standard Webhooks specification describes, so that a
//! receiver verifies them with any of its libraries: a secret is `whsec_` and the
//! base64 of its key; a signature is `v1,` and the base64 of the HMAC-SHA256, under
//! that key, of `<webhook-id>.<webhook-timestamp>.<body>`; the `webhook-signature`
//! header holds one per active secret, separated by spaces.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::core::push::Secret;

/// What every secret starts with.
const PREFIX: &str = "whsec_";

/// A new secret: `whsec_` and the base64 of 32 random bytes.
pub fn new_secret() -> Secret {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).expect("the system's random source");
    Secret::new(format!("{PREFIX}{}", STANDARD.encode(key)))
}

/// A secret's fingerprint, safe to show: `sha256:` and the first 16 hex digits of
/// the SHA-256 of its text. It tells secrets apart without revealing them.
pub fn fingerprint(secret: &Secret) -> String {
    let digest = Sha256::digest(secret.expose().as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The `webhook-signature` header of a message: `v1,<signature>` for each secret,
/// separated by spaces. A secret whose key does not decode signs nothing (secrets
/// are made by [`new_secret`], so that does not happen).
pub fn signatures(secrets: &[Secret], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut header = String::new();
    for secret in secrets {
        let Some(key) = key_of(secret) else { continue };
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("HMAC takes any key length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        if !header.is_empty() {
            header.push(' ');
        }
        header.push_str("v1,");
        header.push_str(&STANDARD.encode(mac.finalize().into_bytes()));
    }
    header
}

/// The HMAC key of a secret: the base64 after its prefix.
fn key_of(secret: &Secret) -> Option<Vec<u8>> {
    let text = secret.expose();
    STANDARD
        .decode(text.strip_prefix(PREFIX).unwrap_or(text))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_secret_is_prefixed_base64_of_32_bytes_and_never_repeats() {
        let one = new_secret();
        let two = new_secret();
        assert_ne!(one, two);
        let key = key_of(&one).unwrap();
        assert_eq!(key.len(), 32);
        assert!(one.expose().starts_with("whsec_"));
        assert!(!format!("{one:?}").contains(one.expose()));
    }

    #[test]
    fn the_signature_is_the_specifications_hmac_of_id_timestamp_and_body() {
        // Computed independently: python3 -c 'import hmac,hashlib,base64;
        // print(base64.b64encode(hmac.new(b"\x00"*32, b"job-1.1700000000.{}",
        // hashlib.sha256).digest()).decode())'
        let secret = Secret::new(format!("whsec_{}", STANDARD.encode([0u8; 32])));
        let header = signatures(std::slice::from_ref(&secret), "job-1", 1_700_000_000, b"{}");
        assert_eq!(header, "v1,0MpdLQpM+5Zq84NXjKzZIRIb4SS054SfJK8DcyzzA6E=");
        let two = signatures(
            &[secret.clone(), new_secret()],
            "job-1",
            1_700_000_000,
            b"{}",
        );
        let parts: Vec<&str> = two.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], header);
    }

    #[test]
    fn a_fingerprint_tells_secrets_apart_without_showing_them() {
        let secret = new_secret();
        let print = fingerprint(&secret);
        assert!(print.starts_with("sha256:") && print.len() == 7 + 16);
        assert_eq!(print, fingerprint(&secret));
        assert_ne!(print, fingerprint(&new_secret()));
        assert!(!secret.expose().contains(&print[7..]));
    }
}
