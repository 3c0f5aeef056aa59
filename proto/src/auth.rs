//! Credentials in request metadata: `authorization: Bearer <token>` on every call.
//!
//! Metadata is readable before the request body, so a server can refuse a caller without
//! reading (or buffering) what it sends.

use tonic::metadata::{AsciiMetadataValue, MetadataMap};

/// The metadata key carrying the credential.
pub const AUTHORIZATION: &str = "authorization";

/// A token that cannot travel in metadata (it must be printable ASCII).
#[derive(Debug, thiserror::Error)]
#[error("the token contains characters that cannot be sent in request metadata")]
pub struct InvalidToken;

/// The metadata value for `token` (`Bearer <token>`); `None` for an empty token (anonymous).
pub fn bearer_value(token: &str) -> Result<Option<AsciiMetadataValue>, InvalidToken> {
    if token.is_empty() {
        return Ok(None);
    }
    format!("Bearer {token}")
        .parse::<AsciiMetadataValue>()
        .map(Some)
        .map_err(|_| InvalidToken)
}

/// Attach `value` (from [`bearer_value`]) to an outgoing request.
pub fn attach<T>(req: &mut tonic::Request<T>, value: Option<&AsciiMetadataValue>) {
    if let Some(v) = value {
        req.metadata_mut().insert(AUTHORIZATION, v.clone());
    }
}

/// A client interceptor attaching one credential to every call.
#[derive(Debug, Clone, Default)]
pub struct Bearer(Option<AsciiMetadataValue>);

impl Bearer {
    /// An interceptor sending `token` (empty: anonymous, no header).
    pub fn new(token: &str) -> Result<Bearer, InvalidToken> {
        Ok(Bearer(bearer_value(token)?))
    }
}

impl tonic::service::Interceptor for Bearer {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        attach(&mut req, self.0.as_ref());
        Ok(req)
    }
}

/// The token a request carries: `Some("")` for a malformed header, `None` when absent.
pub fn bearer_token(meta: &MetadataMap) -> Option<&str> {
    let v = meta.get(AUTHORIZATION)?;
    Some(
        v.to_str()
            .ok()
            .and_then(|s| s.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or(""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_round_trip() {
        let v = bearer_value("abc").unwrap();
        let mut req = tonic::Request::new(());
        attach(&mut req, v.as_ref());
        assert_eq!(bearer_token(req.metadata()), Some("abc"));
        assert!(bearer_value("").unwrap().is_none());
        assert!(bearer_value("a\nb").is_err());
        let req = tonic::Request::new(());
        assert_eq!(bearer_token(req.metadata()), None);
    }
}
