//! Connection limits of the gRPC port, below HTTP/2: at most `max_connections` connections at
//! once (at the cap, accepting pauses and new clients wait in the listen backlog until a
//! connection closes), and a connection must send its first bytes (the HTTP/2 preface, or a
//! TLS hello) within `handshake_timeout`, so idle TCP connections cannot hold the slots.
//! HTTP/2-level idleness is tonic's (keep-alive pings, maximum connection age).

use futures::Stream;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// Bytes a client must send before the handshake deadline no longer applies (the HTTP/2
/// client preface is 24 bytes).
const HANDSHAKE_BYTES: usize = 24;

/// Pause after a failed accept (e.g. out of file descriptors) before trying again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// An accepted connection holding one of the `max_connections` slots until dropped.
#[derive(Debug)]
pub struct Conn {
    io: TcpStream,
    _slot: OwnedSemaphorePermit,
    handshake: Option<Pin<Box<Sleep>>>,
    read: usize,
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                this.read += buf.filled().len() - before;
                if this.read >= HANDSHAKE_BYTES {
                    this.handshake = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let expired = this
                    .handshake
                    .as_mut()
                    .is_some_and(|d| d.as_mut().poll(cx).is_ready());
                if expired {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no request within the handshake timeout",
                    )))
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

/// The connections of `listener`, at most `max_connections` open at once, each closed when it
/// sends fewer than 24 bytes within `handshake_timeout`.
pub fn incoming(
    listener: TcpListener,
    max_connections: usize,
    handshake_timeout: Duration,
) -> impl Stream<Item = io::Result<Conn>> {
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    futures::stream::unfold((listener, slots), move |(l, slots)| async move {
        let slot = match slots.clone().acquire_owned().await {
            Ok(s) => s,
            // The semaphore is never closed.
            Err(_) => return None,
        };
        let r = match l.accept().await {
            Ok((io, _)) => {
                let _ = io.set_nodelay(true);
                Ok(Conn {
                    io,
                    _slot: slot,
                    handshake: Some(Box::pin(tokio::time::sleep(handshake_timeout))),
                    read: 0,
                })
            }
            Err(e) => {
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                Err(e)
            }
        };
        Some((r, (l, slots)))
    })
}
