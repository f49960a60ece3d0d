//! Fetching a web page for scraping: http(s) only, every hop's addresses checked
//! against loopback, link-local and private ranges (unless allowed) and pinned for the
//! connection, redirects followed by hand and re-checked, a time limit for the whole
//! fetch, a size cap while reading, and the charset decoded to UTF-8.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use reqwest::Url;

use crate::error::{Error, Result};

/// Scraping policy from the configuration.
#[derive(Debug, Clone)]
pub struct FetchPolicy {
    pub allow_private: bool,
    pub allowed_hosts: Vec<String>,
    pub max_bytes: u64,
}

/// Most redirects followed.
const MAX_REDIRECTS: usize = 5;

/// A fetched response body.
#[derive(Debug)]
pub struct Fetched {
    pub final_url: Url,
    /// Media type, lower case, without parameters.
    pub media_type: String,
    /// The body; text types are decoded to UTF-8 here.
    pub body: Vec<u8>,
}

/// Whether an address is public (not loopback, private, link-local, unique-local,
/// carrier-grade NAT, multicast, broadcast or unspecified).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_unspecified()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19)))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80)
        }
    }
}

fn fetch_error(url: &Url, why: impl std::fmt::Display) -> Error {
    Error::bad_request(format!("could not fetch {url}: {why}"))
}

/// Resolves `url`'s host and returns an address allowed by `policy`.
async fn checked_addr(url: &Url, policy: &FetchPolicy, deadline: Instant) -> Result<SocketAddr> {
    let host = url
        .host_str()
        .ok_or_else(|| fetch_error(url, "no host"))?
        .to_owned();
    let port = url
        .port_or_known_default()
        .ok_or_else(|| fetch_error(url, "no port"))?;
    let left = deadline.saturating_duration_since(Instant::now());
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let addrs: Vec<SocketAddr> =
        tokio::time::timeout(left, tokio::net::lookup_host((bare.as_str(), port)))
            .await
            .map_err(|_| fetch_error(url, "timed out resolving the host"))?
            .map_err(|e| fetch_error(url, format!("cannot resolve host: {e}")))?
            .collect();
    let allowed_host = policy
        .allowed_hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(&bare));
    if !policy.allow_private && !allowed_host {
        if let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
            return Err(Error::bad_request(format!(
                "refusing to fetch {url}: {host} resolves to the non-public address {} \
                 (set SCRAPE_ALLOW_PRIVATE or SCRAPE_ALLOWED_HOSTS to permit it)",
                bad.ip()
            )));
        }
    }
    addrs
        .into_iter()
        .next()
        .ok_or_else(|| fetch_error(url, "host has no address"))
}

/// Fetches `url` within `timeout` under `policy`.
pub async fn fetch(url: &str, timeout: Duration, policy: &FetchPolicy) -> Result<Fetched> {
    let mut url = Url::parse(url.trim())
        .map_err(|e| Error::bad_request(format!("invalid URL '{url}': {e}")))?;
    let deadline = Instant::now() + timeout;
    for _ in 0..=MAX_REDIRECTS {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(Error::bad_request(format!(
                "only http and https URLs can be scraped, not '{url}'"
            )));
        }
        let addr = checked_addr(&url, policy, deadline).await?;
        let host = url
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let left = deadline.saturating_duration_since(Instant::now());
        // The connection goes to the address that was checked, never a second lookup.
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .resolve(&host, addr)
            .timeout(left)
            .connect_timeout(left.min(Duration::from_secs(10)))
            .user_agent(concat!("ragd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Internal(e.into()))?;
        let resp = client
            .get(url.clone())
            .send()
            .await
            .map_err(|e| describe(&url, e, timeout))?;
        let status = resp.status();
        if status.is_redirection() {
            let loc = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| fetch_error(&url, format!("HTTP {status} without a Location")))?;
            url = url
                .join(loc)
                .map_err(|e| fetch_error(&url, format!("bad redirect '{loc}': {e}")))?;
            tracing::debug!(to = %url, "following redirect");
            continue;
        }
        if !status.is_success() {
            return Err(fetch_error(
                &url,
                format!("the server answered HTTP {status}"),
            ));
        }
        if let Some(len) = resp.content_length() {
            if len > policy.max_bytes {
                return Err(Error::TooLarge(format!(
                    "{url} is {len} bytes; the limit is {}",
                    policy.max_bytes
                )));
            }
        }
        let content_type = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut body = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| describe(&url, e, timeout))?;
            if body.len() as u64 + chunk.len() as u64 > policy.max_bytes {
                return Err(Error::TooLarge(format!(
                    "{url} is larger than the limit of {} bytes",
                    policy.max_bytes
                )));
            }
            body.extend_from_slice(&chunk);
        }
        let media_type = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        let body = decode_text(&media_type, &content_type, body);
        return Ok(Fetched {
            final_url: url,
            media_type,
            body,
        });
    }
    Err(Error::bad_request(format!(
        "too many redirects (more than {MAX_REDIRECTS})"
    )))
}

fn describe(url: &Url, e: reqwest::Error, timeout: Duration) -> Error {
    if e.is_timeout() {
        fetch_error(
            url,
            format!("no complete answer within {}s", timeout.as_secs()),
        )
    } else if e.is_connect() {
        fetch_error(url, "could not connect")
    } else {
        fetch_error(url, e)
    }
}

/// Text bodies are decoded from their charset (header, else `<meta charset>`) to UTF-8.
fn decode_text(media_type: &str, content_type: &str, body: Vec<u8>) -> Vec<u8> {
    if !(media_type.starts_with("text/")
        || media_type.contains("xml")
        || media_type.contains("json"))
    {
        return body;
    }
    let label = content_type
        .split(';')
        .filter_map(|p| p.trim().strip_prefix("charset="))
        .map(|c| c.trim_matches('"').to_owned())
        .next()
        .or_else(|| sniff_meta_charset(&body));
    match label.and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes())) {
        Some(enc) if enc != encoding_rs::UTF_8 => enc.decode(&body).0.into_owned().into_bytes(),
        _ => body,
    }
}

fn sniff_meta_charset(body: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(&body[..body.len().min(2048)]).to_ascii_lowercase();
    let i = head.find("charset=")? + "charset=".len();
    let rest = head[i..].trim_start_matches(['"', '\'']);
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_ranges_are_not_public() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(a.parse().unwrap()), "{a}");
        }
        for a in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(is_public(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn charsets_are_decoded() {
        let latin1 = decode_text(
            "text/html",
            "text/html; charset=iso-8859-1",
            b"caf\xe9".to_vec(),
        );
        assert_eq!(String::from_utf8(latin1).unwrap(), "café");
        let meta = decode_text(
            "text/html",
            "text/html",
            b"<meta charset=\"windows-1252\">caf\xe9".to_vec(),
        );
        assert!(String::from_utf8(meta).unwrap().ends_with("café"));
        assert_eq!(decode_text("application/pdf", "", vec![0xe9]), vec![0xe9]);
    }
}
