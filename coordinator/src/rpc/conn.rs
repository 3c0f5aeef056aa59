//! Connection limits of both ports (gRPC and HTTP), below the protocols:
//!
//! * at most `max_connections` connections at once (at the cap, accepting pauses and new
//!   clients wait in the listen backlog until a connection closes);
//! * at most `max_per_address` from one address (an IPv4 address, or an IPv6 /64): one more is
//!   accepted and closed at once, so that one address cannot take the slots of everyone else;
//! * until its first request reaches the service, a connection must get there within
//!   `handshake_timeout` (a TLS handshake left unfinished, an HTTP/2 client that sends its
//!   preface and answers pings but asks nothing, a partial HTTP/1 request);
//! * after that it is closed when no request has been in flight for `idle_timeout`.
//!
//! The deadline is checked whenever the protocol layer waits to read (it always does on an open
//! connection), and an expired deadline is a read error, which closes the connection. Requests
//! are counted by [`Admission::begin`] (a tower layer on the gRPC routes, a middleware on the HTTP
//! router), which finds the connection's [`Track`] by its remote address.

use futures::Stream;
use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// The limits of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Connections open at once.
    pub max_connections: usize,
    /// Connections open at once from one address (IPv4 address, IPv6 /64).
    pub max_per_address: usize,
    /// Time from accepting a connection to its first request.
    pub handshake_timeout: Duration,
    /// Time a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
}

/// The address a per-address limit counts: the IPv4 address, or the /64 of an IPv6 address
/// (one host usually owns a whole /64).
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

/// Requests of one connection, shared by the connection and the request layer.
#[derive(Debug)]
pub struct Track {
    opened: Instant,
    in_flight: AtomicUsize,
    requests: AtomicU64,
    /// Milliseconds after `opened` when the last request ended.
    last_end_ms: AtomicU64,
}

impl Track {
    fn new() -> Self {
        Track {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            last_end_ms: AtomicU64::new(0),
        }
    }

    /// A request started on this connection; it ends when the guard drops.
    pub fn begin(self: &Arc<Self>) -> RequestGuard {
        self.requests.fetch_add(1, Ordering::SeqCst);
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        RequestGuard(self.clone())
    }

    /// When the connection must be closed if nothing changes (`None`: a request is in flight).
    fn deadline(&self, limits: &ConnLimits) -> Option<Instant> {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        if self.requests.load(Ordering::SeqCst) == 0 {
            return Some(self.opened + limits.handshake_timeout);
        }
        let end = Duration::from_millis(self.last_end_ms.load(Ordering::SeqCst));
        Some(self.opened + end + limits.idle_timeout)
    }
}

/// One request in flight (see [`Track::begin`]).
#[derive(Debug)]
pub struct RequestGuard(Arc<Track>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let ms = u64::try_from(self.0.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_end_ms.fetch_max(ms, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[derive(Debug, Default)]
struct Table {
    per_address: HashMap<IpAddr, usize>,
    tracks: HashMap<SocketAddr, Weak<Track>>,
}

/// The admission state of one port: free slots, connections per address, and each open
/// connection's [`Track`] by remote address.
#[derive(Debug, Clone)]
pub struct Admission {
    limits: ConnLimits,
    slots: Arc<Semaphore>,
    table: Arc<Mutex<Table>>,
}

impl Admission {
    /// Admission under `limits`.
    pub fn new(limits: ConnLimits) -> Self {
        Admission {
            limits,
            slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
            table: Arc::new(Mutex::new(Table::default())),
        }
    }

    /// The limits.
    pub fn limits(&self) -> ConnLimits {
        self.limits
    }

    /// Connections that could still be accepted now.
    pub fn free_slots(&self) -> usize {
        self.slots.available_permits()
    }

    /// Connections open from `ip`'s address (see [`address_key`]).
    pub fn open_from(&self, ip: IpAddr) -> usize {
        self.lock()
            .per_address
            .get(&address_key(ip))
            .copied()
            .unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A request from the connection whose peer is `remote` started (`None`: not one of ours).
    pub fn begin(&self, remote: SocketAddr) -> Option<RequestGuard> {
        let t = self.lock().tracks.get(&remote).and_then(Weak::upgrade)?;
        Some(t.begin())
    }

    /// Wait for a free slot, accept, and admit the connection unless its address is at its
    /// limit (then it is closed and the next one accepted).
    pub async fn accept(&self, l: &TcpListener) -> io::Result<Conn> {
        loop {
            let slot = self
                .slots
                .clone()
                .acquire_owned()
                .await
                .map_err(|_| io::Error::other("admission closed"))?;
            let (io, remote) = match l.accept().await {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    return Err(e);
                }
            };
            let key = address_key(remote.ip());
            let track = Arc::new(Track::new());
            {
                let mut t = self.lock();
                let n = t.per_address.entry(key).or_insert(0);
                if *n >= self.limits.max_per_address.max(1) {
                    tracing::debug!(peer = %remote, open = *n, "connection refused: too many from this address");
                    drop(t);
                    drop(io);
                    continue;
                }
                *n += 1;
                t.tracks.insert(remote, Arc::downgrade(&track));
            }
            let _ = io.set_nodelay(true);
            let deadline = Box::pin(tokio::time::sleep_until(
                track.opened + self.limits.handshake_timeout,
            ));
            return Ok(Conn {
                io,
                _slot: Slot {
                    _permit: slot,
                    admission: self.clone(),
                    key,
                    remote,
                },
                track,
                limits: self.limits,
                deadline,
            });
        }
    }
}

/// A connection's place in the admission table, given back when the connection drops.
#[derive(Debug)]
struct Slot {
    _permit: OwnedSemaphorePermit,
    admission: Admission,
    key: IpAddr,
    remote: SocketAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut t = self.admission.lock();
        if let Some(n) = t.per_address.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                t.per_address.remove(&self.key);
            }
        }
        t.tracks.remove(&self.remote);
    }
}

/// An admitted connection holding its slot until dropped; reads fail once its handshake or
/// idle deadline passes.
#[derive(Debug)]
pub struct Conn {
    io: TcpStream,
    _slot: Slot,
    track: Arc<Track>,
    limits: ConnLimits,
    deadline: Pin<Box<Sleep>>,
}

impl Conn {
    /// The connection's requests.
    pub fn track(&self) -> Arc<Track> {
        self.track.clone()
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self._slot.remote
    }

    /// Whether the deadline has passed (re-arming the timer when it has moved).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            let now = Instant::now();
            match self.track.deadline(&self.limits) {
                Some(d) if d <= now => return true,
                Some(d) => self.deadline.as_mut().reset(d),
                // A request is in flight: look again after the idle timeout.
                None => self
                    .deadline
                    .as_mut()
                    .reset(now + self.limits.idle_timeout.max(Duration::from_millis(10))),
            }
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Pending => {
                if this.expired(cx) {
                    let what = if this.track.requests.load(Ordering::SeqCst) == 0 {
                        "no request within the handshake timeout"
                    } else {
                        "idle beyond the idle timeout"
                    };
                    tracing::debug!(peer = %this._slot.remote, what, "connection closed");
                    Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, what)))
                } else {
                    Poll::Pending
                }
            }
            r => r,
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

/// The admitted connections of `listener` (the gRPC port).
pub fn incoming(
    listener: TcpListener,
    admission: Admission,
) -> impl Stream<Item = io::Result<Conn>> {
    futures::stream::unfold((listener, admission), |(l, a)| async move {
        let r = a.accept(&l).await;
        Some((r, (l, a)))
    })
}

/// The HTTP port's listener for `axum::serve`, under the same admission rules.
#[derive(Debug)]
pub struct HttpListener {
    listener: TcpListener,
    admission: Admission,
}

impl HttpListener {
    /// Admit the connections of `listener` under `admission`.
    pub fn new(listener: TcpListener, admission: Admission) -> Self {
        HttpListener {
            listener,
            admission,
        }
    }
}

impl axum::serve::Listener for HttpListener {
    type Io = Conn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Conn, SocketAddr) {
        loop {
            if let Ok(c) = self.admission.accept(&self.listener).await {
                let r = c.remote();
                return (c, r);
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

/// What the HTTP router learns of a request's connection (its connect info).
#[derive(Debug, Clone)]
pub struct HttpPeer {
    /// The peer's address.
    pub remote: SocketAddr,
    track: Arc<Track>,
}

impl HttpPeer {
    /// A request on this connection started (see [`Track::begin`]).
    pub fn begin(&self) -> RequestGuard {
        self.track.begin()
    }
}

impl axum::extract::connect_info::Connected<axum::serve::IncomingStream<'_, HttpListener>>
    for HttpPeer
{
    fn connect_info(s: axum::serve::IncomingStream<'_, HttpListener>) -> Self {
        HttpPeer {
            remote: *s.remote_addr(),
            track: s.io().track(),
        }
    }
}

/// The remote address of a gRPC request (plain or TLS), to find its connection.
pub fn grpc_remote<B>(req: &axum::http::Request<B>) -> Option<SocketAddr> {
    let e = req.extensions();
    e.get::<TcpConnectInfo>()
        .and_then(|i| i.remote_addr())
        .or_else(|| {
            e.get::<tonic::transport::server::TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|i| i.get_ref().remote_addr())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn limits(per: usize) -> ConnLimits {
        ConnLimits {
            max_connections: 64,
            max_per_address: per,
            handshake_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_millis(600),
        }
    }

    #[test]
    fn ipv6_addresses_count_by_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        let m: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(address_key(m), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    /// Bytes alone (a stalled handshake) do not keep a connection: only a request does, and
    /// then only while requests keep coming.
    #[tokio::test]
    async fn bytes_without_a_request_do_not_hold_a_slot() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let adm = Admission::new(limits(8));
        let a2 = adm.clone();
        let server = tokio::spawn(async move {
            let mut c = a2.accept(&l).await.unwrap();
            let mut buf = vec![0u8; 4096];
            let mut got = 0;
            let err = loop {
                match c.read(&mut buf).await {
                    Ok(0) => break None,
                    Ok(n) => got += n,
                    Err(e) => break Some(e),
                }
            };
            (got, err)
        });
        let mut s = TcpStream::connect(addr).await.unwrap();
        // More than any preface, sent in pieces past the old 24-byte rule.
        for _ in 0..5 {
            s.write_all(&[0x16; 40]).await.unwrap();
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        let (got, err) = server.await.unwrap();
        assert_eq!(got, 200);
        assert_eq!(err.map(|e| e.kind()), Some(io::ErrorKind::TimedOut));
        assert_eq!(adm.free_slots(), 64);
    }

    #[tokio::test]
    async fn requests_keep_a_connection_and_idleness_ends_it() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let adm = Admission::new(limits(8));
        let a2 = adm.clone();
        let server = tokio::spawn(async move {
            let mut c = a2.accept(&l).await.unwrap();
            let mut buf = [0u8; 64];
            let t0 = Instant::now();
            let r = c.read(&mut buf).await;
            (t0.elapsed(), r.map_err(|e| e.kind()))
        });
        let s = TcpStream::connect(addr).await.unwrap();
        let local = s.local_addr().unwrap();
        // A request in flight across both deadlines keeps the connection.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let g = adm.begin(local).expect("the connection is tracked");
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(!server.is_finished(), "closed with a request in flight");
        drop(g);
        // Then idle: closed.
        let (_, r) = server.await.unwrap();
        assert_eq!(r.err(), Some(io::ErrorKind::TimedOut));
        assert!(
            adm.begin(local).is_none(),
            "the track is gone with the connection"
        );
        drop(s);
    }

    #[tokio::test]
    async fn one_address_gets_at_most_its_share() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let adm = Admission::new(limits(3));
        let a2 = adm.clone();
        let server = tokio::spawn(async move {
            let mut kept = Vec::new();
            for _ in 0..3 {
                kept.push(a2.accept(&l).await.unwrap());
            }
            // The 4th and 5th clients from the same address are closed; a 6th from
            // another address is admitted.
            let other = a2.accept(&l).await.unwrap();
            (kept, other.remote().ip())
        });
        let mut clients = Vec::new();
        for _ in 0..5 {
            clients.push(TcpStream::connect(addr).await.unwrap());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let _other = sock.connect(addr).await.unwrap();
        let (kept, other_ip) = server.await.unwrap();
        assert_eq!(other_ip, "127.0.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(kept.len(), 3);
        assert_eq!(adm.open_from("127.0.0.1".parse().unwrap()), 3);
        // The refused ones see the connection closed.
        let mut closed = 0;
        for c in &mut clients {
            let mut b = [0u8; 1];
            if let Ok(Ok(0)) =
                tokio::time::timeout(Duration::from_millis(200), c.read(&mut b)).await
            {
                closed += 1;
            }
        }
        assert_eq!(closed, 2);
    }
}
