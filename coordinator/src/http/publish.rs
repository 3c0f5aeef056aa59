//! The published book (opt-in: `publish_book = true`, `serve --publish-book`): `/book.dat`
//! (Edax) and `/book.egbk3` (Egaroucid) on the HTTP port, for anyone who may reach it.
//!
//! - Consistent: each file is the encoding of one copy of the book taken under the growth
//!   lock ([`Coordinator::book_snapshot_at`]), with the book crate's one writer
//!   ([`BookFormat::write`]), stamped with the date of the encoding as `export` does.
//! - Cached until the book changes: the bytes are kept with the book revision they encode and
//!   served again while the revision is the same; one encoding per format runs at a time
//!   (requests that arrive meanwhile wait for it and get its bytes). Each file has a strong
//!   `ETag` (SHA-256 of its bytes), so a client that has it gets `304 Not Modified`.
//! - Rate-limited per client address ([`PER_MINUTE`], burst [`BURST`]): beyond, `429` with
//!   `Retry-After`. A file of a large book is tens of megabytes; the limit bounds what one
//!   client can draw, the cache bounds the CPU.
//! - Off by default: the routes answer `404` (the book may be the operator's own).

use crate::service::Coordinator;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bookfarm_book::{BookDate, BookFormat, Revision};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use sha2::{Digest, Sha256};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;

/// Downloads per minute one client address may start (304 answers included).
pub const PER_MINUTE: u32 = 6;

/// Downloads one client address may start at once before the rate applies.
pub const BURST: u32 = 3;

/// One format's cached file.
#[derive(Debug, Clone)]
struct Encoded {
    /// The service's reopens when it was encoded (a reopened service counts revisions anew).
    reopens: u64,
    revision: Revision,
    bytes: bytes::Bytes,
    etag: HeaderValue,
}

/// The published files and the per-address limit (shared by the HTTP handlers).
#[derive(Debug)]
pub struct Published {
    dat: tokio::sync::Mutex<Option<Encoded>>,
    egbk3: tokio::sync::Mutex<Option<Encoded>>,
    limiter: DefaultKeyedRateLimiter<IpAddr>,
}

impl Default for Published {
    fn default() -> Published {
        Published::new(PER_MINUTE, BURST)
    }
}

impl Published {
    /// A cache with its own limit: `per_minute` downloads per address, `burst` at once.
    pub fn new(per_minute: u32, burst: u32) -> Published {
        let quota =
            Quota::per_minute(NonZeroU32::new(per_minute.max(1)).unwrap_or(NonZeroU32::MIN))
                .allow_burst(NonZeroU32::new(burst.max(1)).unwrap_or(NonZeroU32::MIN));
        Published {
            dat: tokio::sync::Mutex::new(None),
            egbk3: tokio::sync::Mutex::new(None),
            limiter: DefaultKeyedRateLimiter::keyed(quota),
        }
    }

    /// The file of `format` for the book as it is now: the cached one while the book has not
    /// changed, else a new encoding of one consistent copy.
    async fn file(
        &self,
        c: &Coordinator,
        reopens: u64,
        format: BookFormat,
    ) -> Result<Encoded, String> {
        let slot = match format {
            BookFormat::Egbk3 => &self.egbk3,
            _ => &self.dat,
        };
        // Held across the encoding: one encoding per format at a time.
        let mut cached = slot.lock().await;
        let now = {
            let c = c.clone();
            tokio::task::spawn_blocking(move || c.book_revision())
                .await
                .map_err(|e| e.to_string())?
        };
        if let Some(e) = cached
            .as_ref()
            .filter(|e| e.revision == now && e.reopens == reopens)
        {
            return Ok(e.clone());
        }
        let c = c.clone();
        let fresh = tokio::task::spawn_blocking(move || {
            let (revision, mut book) = c.book_snapshot_at();
            book.header_mut().date = BookDate::now();
            let bytes = format.write(&book);
            let digest = Sha256::digest(&bytes);
            let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
            Encoded {
                reopens,
                revision,
                etag: HeaderValue::from_str(&format!("\"{hex}\""))
                    .unwrap_or_else(|_| HeaderValue::from_static("\"\"")),
                bytes: bytes::Bytes::from(bytes),
            }
        })
        .await
        .map_err(|e| e.to_string())?;
        *cached = Some(fresh.clone());
        Ok(fresh)
    }
}

/// What the published-book handlers need.
#[derive(Debug, Clone)]
pub struct PublishState {
    /// The service.
    pub live: crate::live::Live,
    /// The cache and the limit.
    pub published: Arc<Published>,
}

/// `GET /book.dat`.
pub async fn book_dat(State(s): State<PublishState>, req: Request) -> Response {
    serve(s, req, BookFormat::Edax).await
}

/// `GET /book.egbk3`.
pub async fn book_egbk3(State(s): State<PublishState>, req: Request) -> Response {
    serve(s, req, BookFormat::Egbk3).await
}

fn text(status: StatusCode, msg: &'static str) -> Response {
    (status, msg).into_response()
}

async fn serve(s: PublishState, req: Request, format: BookFormat) -> Response {
    let c = match s.live.get() {
        Ok(c) => c,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    };
    if !c.config().publish_book {
        return text(
            StatusCode::NOT_FOUND,
            "the book is not published here (publish_book = false)\n",
        );
    }
    // Without the peer's address (a router served without connect info) every client shares
    // one limit.
    let ext = req.extensions();
    let ip = ext
        .get::<ConnectInfo<crate::rpc::conn::HttpPeer>>()
        .map(|ci| ci.0.remote.ip())
        .or_else(|| ext.get::<ConnectInfo<SocketAddr>>().map(|ci| ci.0.ip()))
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    if let Err(n) = s.published.limiter.check_key(&ip) {
        let not_until = n.wait_time_from(DefaultClock::default().now());
        let mut r = text(
            StatusCode::TOO_MANY_REQUESTS,
            "too many book downloads from this address; retry later\n",
        );
        let secs = not_until.as_secs().max(1);
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let file = match s.published.file(&c, s.live.reopens(), format).await {
        Ok(f) => f,
        Err(e) => {
            tracing::warn!(error = %e, "published book not encoded");
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the book could not be encoded\n",
            );
        }
    };
    let fresh = req
        .headers()
        .get(header::IF_NONE_MATCH)
        .is_some_and(|v| v.as_bytes() == file.etag.as_bytes());
    let mut r = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        Response::new(Body::from(file.bytes.clone()))
    };
    let h = r.headers_mut();
    h.insert(header::ETAG, file.etag.clone());
    // Cached by clients, but checked with the ETag every time (the book changes as it grows).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if !fresh {
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        );
        let name = match format {
            BookFormat::Egbk3 => "attachment; filename=\"book.egbk3\"",
            _ => "attachment; filename=\"book.dat\"",
        };
        h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static(name));
    }
    r
}
