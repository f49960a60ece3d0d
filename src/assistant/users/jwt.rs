//! HS256 bearer tokens: verified here with `hmac` + `sha2` (no other algorithm is
//! accepted). `sub` is the user's email; `exp` is required and checked against the
//! server clock; `nbf`, when present, too.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use serde_json::Value;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Why a token was refused (logged; the client gets a generic 401).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("malformed token")]
    Malformed,
    #[error("unsupported algorithm (only HS256)")]
    Algorithm,
    #[error("bad signature")]
    Signature,
    #[error("token expired")]
    Expired,
    #[error("token not yet valid")]
    NotYetValid,
    #[error("missing claim: {0}")]
    MissingClaim(&'static str),
}

#[derive(Deserialize)]
struct Header {
    alg: String,
}

/// The claims ragd reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    /// The user's email.
    pub sub: String,
    /// Expiry, Unix seconds.
    pub exp: i64,
}

/// Verifies `token` with `secret` at `now` (Unix seconds) and returns its claims.
pub fn verify(token: &str, secret: &[u8], now: i64) -> Result<Claims, JwtError> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed);
    };
    let header: Header = decode_json(h)?;
    if header.alg != "HS256" {
        return Err(JwtError::Algorithm);
    }
    let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| JwtError::Malformed)?;
    let mut mac = HmacSha256::new_from_slice(secret).map_err(|_| JwtError::Signature)?;
    mac.update(h.as_bytes());
    mac.update(b".");
    mac.update(p.as_bytes());
    // `verify_slice` compares in constant time.
    mac.verify_slice(&sig).map_err(|_| JwtError::Signature)?;

    let claims: Value = decode_json(p)?;
    let exp = claims
        .get("exp")
        .and_then(Value::as_f64)
        .ok_or(JwtError::MissingClaim("exp"))? as i64;
    if now >= exp {
        return Err(JwtError::Expired);
    }
    if let Some(nbf) = claims.get("nbf").and_then(Value::as_f64) {
        if now < nbf as i64 {
            return Err(JwtError::NotYetValid);
        }
    }
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(JwtError::MissingClaim("sub"))?;
    Ok(Claims {
        sub: sub.to_owned(),
        exp,
    })
}

/// Signs `claims` (a JSON object) with HS256; for tests and tooling.
pub fn sign(claims: &Value, secret: &[u8]) -> String {
    let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let p = URL_SAFE_NO_PAD.encode(claims.to_string().as_bytes());
    let mut mac = match HmacSha256::new_from_slice(secret) {
        Ok(m) => m,
        // HMAC takes a key of any length; this cannot fail.
        Err(_) => return String::new(),
    };
    mac.update(h.as_bytes());
    mac.update(b".");
    mac.update(p.as_bytes());
    let s = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{h}.{p}.{s}")
}

fn decode_json<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, JwtError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| JwtError::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| JwtError::Malformed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn verifies_signature_and_expiry() {
        let t = sign(&json!({"sub": "a@b.c", "exp": 1000}), b"k");
        assert_eq!(verify(&t, b"k", 999).unwrap().sub, "a@b.c");
        assert_eq!(verify(&t, b"k", 1000), Err(JwtError::Expired));
        assert_eq!(verify(&t, b"other", 999), Err(JwtError::Signature));
        let no_exp = sign(&json!({"sub": "a@b.c"}), b"k");
        assert_eq!(verify(&no_exp, b"k", 1), Err(JwtError::MissingClaim("exp")));
        assert_eq!(verify("a.b", b"k", 1), Err(JwtError::Malformed));
    }

    #[test]
    fn rejects_alg_none() {
        let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let p = URL_SAFE_NO_PAD.encode(br#"{"sub":"a","exp":99}"#);
        assert_eq!(
            verify(&format!("{h}.{p}."), b"k", 1),
            Err(JwtError::Algorithm)
        );
    }
}
