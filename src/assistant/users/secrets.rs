//! Passwords (argon2), random credentials and hashed secrets compared in constant time.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A random token of `n` UUIDv4s (122 random bits each, from the OS generator), as hex.
pub fn random_token(n: usize) -> String {
    (0..n.max(1))
        .map(|_| uuid::Uuid::new_v4().simple().to_string())
        .collect()
}

/// SHA-256 of `s`, hex.
pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Whether `given` hashes to `stored_hex`, compared in constant time.
pub fn secret_matches(stored_hex: &str, given: &str) -> bool {
    sha256_hex(given)
        .as_bytes()
        .ct_eq(stored_hex.as_bytes())
        .into()
}

/// The argon2id PHC string of `password` with a fresh random salt.
pub fn hash_password(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::encode_b64(uuid::Uuid::new_v4().as_bytes())
        .map_err(|e| anyhow::anyhow!("encoding a salt: {e}"))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("hashing a password: {e}"))
}

/// Whether `password` matches the PHC string `phc` (false for a malformed one).
pub fn verify_password(phc: &str, password: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(h) => Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok(),
        Err(e) => {
            tracing::warn!(error = %e, "malformed password hash in the users table");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_and_secrets_round_trip() {
        let h = hash_password("correct horse").unwrap();
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "wrong"));
        let s = random_token(2);
        assert_eq!(s.len(), 64);
        assert!(secret_matches(&sha256_hex(&s), &s));
        assert!(!secret_matches(&sha256_hex(&s), "x"));
    }
}
