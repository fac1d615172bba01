//! The SigV4 check of a Function URL with `AuthType: AWS_IAM`, as Lambda
//! makes it: the request's `Authorization` header names a known access key,
//! a scope of today's date, the local region, the service `lambda` and
//! `aws4_request`; its `X-Amz-Date` is within [`MAX_SKEW`] of now; and the
//! signature the `aws-sigv4` crate computes over the method, the path, the
//! query, the headers the caller signed and the SHA-256 of the body equals the
//! caller's, compared in constant time.
//!
//! The payload hash is always that of the body as received: a signed
//! `x-amz-content-sha256` that disagrees with it (or says `UNSIGNED-PAYLOAD`)
//! makes the signatures differ, as a tampered body does.
//!
//! A refusal says why in [`Denied`], for tests and logs; the caller only ever
//! sees Lambda's `403 {"Message":"Forbidden"}`.

use aws_sdk_dynamodb::config::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use http::request::Parts;
use std::time::{Duration, SystemTime};
use subtle::ConstantTimeEq;

/// The service a Function URL request is signed for.
pub const SERVICE: &str = "lambda";
/// The most time between a request's `X-Amz-Date` and now, either way.
pub const MAX_SKEW: Duration = Duration::from_secs(5 * 60);
/// Most headers a caller may sign (hyper admits at most 100 anyway).
const MAX_SIGNED_HEADERS: usize = 64;

/// The credentials requests must be signed with, and the region.
#[derive(Debug, Clone, Copy)]
pub struct Keys<'a> {
    /// The access key id.
    pub access_key_id: &'a str,
    /// Its secret.
    pub secret_access_key: &'a str,
    /// The region requests are signed for.
    pub region: &'a str,
}

/// The headers that sign a POST of `body` to `url` (with its `host` and
/// `content-type`) for `service` with `keys` at `at`, as an SDK or `curl
/// --aws-sigv4` signs it: what a caller adds to the request.
pub fn signing_headers(
    url: &str,
    host: &str,
    body: &[u8],
    keys: Keys<'_>,
    service: &str,
    at: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let identity = Credentials::new(
        keys.access_key_id,
        keys.secret_access_key,
        None,
        None,
        "local",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(keys.region)
        .name(service)
        .time(at)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let headers = [("host", host), ("content-type", "application/json")];
    let signable =
        SignableRequest::new("POST", url, headers.into_iter(), SignableBody::Bytes(body))
            .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    let (signed, _) = instructions.into_parts();
    Ok(signed
        .into_iter()
        .map(|header| (header.name().to_owned(), header.value().to_owned()))
        .collect())
}

/// Who signed an accepted request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The access key id the request was signed with.
    pub access_key: String,
}

/// Why a request was refused (never shown to the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub &'static str);

/// The parts of an `Authorization: AWS4-HMAC-SHA256 ...` header.
struct Authorization<'a> {
    access_key: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
    terminator: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

fn parse_authorization(value: &str) -> Result<Authorization<'_>, Denied> {
    let fields = value
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or(Denied("not an AWS4-HMAC-SHA256 authorization"))?;
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for field in fields.split(',') {
        match field.trim().split_once('=') {
            Some(("Credential", v)) => credential = Some(v),
            Some(("SignedHeaders", v)) => signed = Some(v),
            Some(("Signature", v)) => signature = Some(v),
            _ => return Err(Denied("malformed authorization")),
        }
    }
    let credential = credential.ok_or(Denied("no Credential"))?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [access_key, date, region, service, terminator] = scope[..] else {
        return Err(Denied("malformed credential scope"));
    };
    let signed_headers: Vec<&str> = signed
        .ok_or(Denied("no SignedHeaders"))?
        .split(';')
        .collect();
    if signed_headers.len() > MAX_SIGNED_HEADERS {
        return Err(Denied("too many signed headers"));
    }
    Ok(Authorization {
        access_key,
        date,
        region,
        service,
        terminator,
        signed_headers,
        signature: signature.ok_or(Denied("no Signature"))?,
    })
}

/// `X-Amz-Date` (`20261126T090000Z`) as a time.
fn amz_date(text: &str) -> Result<SystemTime, Denied> {
    let format =
        time::format_description::parse("[year][month][day]T[hour repr:24][minute][second]Z")
            .map_err(|_| Denied("date format"))?;
    time::PrimitiveDateTime::parse(text, &format)
        .map(|t| SystemTime::from(t.assume_utc()))
        .map_err(|_| Denied("malformed X-Amz-Date"))
}

/// Accept the request (`parts` and its whole `body`) if it is signed as
/// Lambda requires with `keys`, at `now`.
pub fn verify(
    parts: &Parts,
    body: &[u8],
    now: SystemTime,
    keys: &Keys<'_>,
) -> Result<Caller, Denied> {
    let mut values = parts.headers.get_all(http::header::AUTHORIZATION).iter();
    let header = values.next().ok_or(Denied("unsigned"))?;
    if values.next().is_some() {
        return Err(Denied("two Authorization headers"));
    }
    let auth = parse_authorization(header.to_str().map_err(|_| Denied("authorization text"))?)?;
    if auth.access_key != keys.access_key_id {
        return Err(Denied("unknown access key"));
    }
    if auth.region != keys.region {
        return Err(Denied("wrong region"));
    }
    if auth.service != SERVICE {
        return Err(Denied("wrong service"));
    }
    if auth.terminator != "aws4_request" {
        return Err(Denied("wrong scope terminator"));
    }
    let date_text = parts
        .headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or(Denied("no X-Amz-Date"))?;
    let signed_at = amz_date(date_text)?;
    let skew = now
        .duration_since(signed_at)
        .or_else(|_| signed_at.duration_since(now))
        .unwrap_or(Duration::MAX);
    if skew > MAX_SKEW {
        return Err(Denied("signature expired or not yet valid"));
    }
    if !date_text.starts_with(auth.date) || auth.date.len() != 8 {
        return Err(Denied("credential date is not the request's date"));
    }
    for required in ["host", "x-amz-date"] {
        if !auth.signed_headers.contains(&required) {
            return Err(Denied("host and x-amz-date must be signed"));
        }
    }
    let expected = signature(parts, body, signed_at, &auth.signed_headers, keys)?;
    if bool::from(expected.as_bytes().ct_eq(auth.signature.as_bytes())) {
        Ok(Caller {
            access_key: auth.access_key.to_owned(),
        })
    } else {
        Err(Denied("signature does not match"))
    }
}

/// The signature `aws-sigv4` computes for the request with the headers the
/// caller signed, at the time it says it signed.
fn signature(
    parts: &Parts,
    body: &[u8],
    signed_at: SystemTime,
    signed_headers: &[&str],
    keys: &Keys<'_>,
) -> Result<String, Denied> {
    let mut headers: Vec<(&str, &str)> = Vec::new();
    for name in signed_headers {
        if name.eq_ignore_ascii_case("authorization") {
            return Err(Denied("the authorization header cannot be signed"));
        }
        let mut found = false;
        for value in parts.headers.get_all(*name) {
            found = true;
            let value = value.to_str().map_err(|_| Denied("signed header text"))?;
            headers.push((name, value));
        }
        if !found {
            return Err(Denied("a signed header is missing"));
        }
    }
    let identity = Credentials::new(
        keys.access_key_id,
        keys.secret_access_key,
        None,
        None,
        "function-url",
    )
    .into();
    let mut settings = SigningSettings::default();
    // Exactly the headers the caller signed, whichever they are.
    settings.excluded_headers = None;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(keys.region)
        .name(SERVICE)
        .time(signed_at)
        .settings(settings)
        .build()
        .map_err(|_| Denied("signing parameters"))?
        .into();
    let uri = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let request = SignableRequest::new(
        parts.method.as_str(),
        uri,
        headers.into_iter(),
        SignableBody::Bytes(body),
    )
    .map_err(|_| Denied("the request cannot be signed"))?;
    let output = sign(request, &params).map_err(|_| Denied("the request cannot be signed"))?;
    Ok(output.signature().to_owned())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const KEYS: Keys<'static> = Keys {
        access_key_id: "local",
        secret_access_key: "local",
        region: "us-east-1",
    };
    /// 2026-11-26T09:00:00Z.
    pub(crate) fn signing_time() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_683_600)
    }

    /// A POST of `body` signed by `aws-sigv4` as an SDK signs it.
    pub(crate) fn signed(
        body: &[u8],
        keys: Keys<'_>,
        service: &str,
        at: SystemTime,
    ) -> http::Request<Vec<u8>> {
        let (path, host) = ("/?a=1&b=x%20y", "127.0.0.1:9000");
        let mut request = http::Request::post(path)
            .header("host", host)
            .header("content-type", "application/json")
            .body(body.to_vec())
            .expect("request");
        let signing = signing_headers(path, host, body, keys, service, at).expect("signed");
        for (name, value) in signing {
            request.headers_mut().insert(
                http::header::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                http::header::HeaderValue::from_str(&value).expect("value"),
            );
        }
        request
    }

    fn check(request: &http::Request<Vec<u8>>, now: SystemTime) -> Result<Caller, Denied> {
        let (parts, body) = request.clone().into_parts();
        verify(&parts, &body, now, &KEYS)
    }

    const BODY: &[u8] = br#"{"operation":"hash","cost":4,"passwords":["pw"]}"#;

    #[test]
    fn a_request_signed_with_aws_sigv4_passes() {
        let request = signed(BODY, KEYS, SERVICE, signing_time());
        assert_eq!(
            check(&request, signing_time() + Duration::from_secs(299)),
            Ok(Caller {
                access_key: "local".into()
            })
        );
    }

    #[test]
    fn unsigned_tampered_and_misdirected_requests_fail() {
        let at = signing_time();
        let good = signed(BODY, KEYS, SERVICE, at);
        let mut unsigned = good.clone();
        unsigned.headers_mut().remove("authorization");
        assert_eq!(check(&unsigned, at), Err(Denied("unsigned")));

        let mut tampered = good.clone();
        *tampered.body_mut() = br#"{"operation":"hash","cost":4,"passwords":["px"]}"#.to_vec();
        assert_eq!(
            check(&tampered, at),
            Err(Denied("signature does not match"))
        );

        let mut moved = good.clone();
        *moved.uri_mut() = "/?a=2&b=x%20y".parse().expect("uri");
        assert_eq!(check(&moved, at), Err(Denied("signature does not match")));

        let west = Keys {
            region: "us-west-2",
            ..KEYS
        };
        assert_eq!(
            check(&signed(BODY, west, SERVICE, at), at),
            Err(Denied("wrong region"))
        );
        assert_eq!(
            check(&signed(BODY, KEYS, "execute-api", at), at),
            Err(Denied("wrong service"))
        );
        let stranger = Keys {
            access_key_id: "AKIDEXAMPLE",
            ..KEYS
        };
        assert_eq!(
            check(&signed(BODY, stranger, SERVICE, at), at),
            Err(Denied("unknown access key"))
        );
        let wrong_secret = Keys {
            secret_access_key: "not-the-secret",
            ..KEYS
        };
        assert_eq!(
            check(&signed(BODY, wrong_secret, SERVICE, at), at),
            Err(Denied("signature does not match"))
        );
    }

    #[test]
    fn signatures_older_or_newer_than_five_minutes_fail() {
        let request = signed(BODY, KEYS, SERVICE, signing_time());
        let expired = Err(Denied("signature expired or not yet valid"));
        assert_eq!(
            check(&request, signing_time() + Duration::from_secs(6 * 60)),
            expired
        );
        assert_eq!(
            check(&request, signing_time() - Duration::from_secs(6 * 60)),
            expired
        );
    }

    #[test]
    fn malformed_authorizations_are_refused_without_panicking() {
        let at = signing_time();
        let good = signed(BODY, KEYS, SERVICE, at);
        let auth = good.headers()["authorization"]
            .to_str()
            .expect("text")
            .to_owned();
        for broken in [
            "Basic abc".to_owned(),
            "AWS4-HMAC-SHA256 ".to_owned(),
            "AWS4-HMAC-SHA256 Credential=local, SignedHeaders=host, Signature=00".to_owned(),
            auth.replace("SignedHeaders=", "SignedHeaders=authorization;"),
            auth.replace("SignedHeaders=", "SignedHeaders=x-missing;"),
            auth.replace("content-type;", ""),
            auth.replace("host;", ""),
            auth.replace("/aws4_request", "/aws5_request"),
        ] {
            let mut request = good.clone();
            request
                .headers_mut()
                .insert("authorization", broken.parse().expect("header"));
            assert!(check(&request, at).is_err(), "{broken}");
        }
        let mut no_date = good.clone();
        no_date.headers_mut().remove("x-amz-date");
        assert_eq!(check(&no_date, at), Err(Denied("no X-Amz-Date")));
    }
}
