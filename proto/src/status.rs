//! The single mapping from domain errors to `tonic::Status`, and back for clients.
//!
//! Every service error implements [`ServiceError`]; handlers call [`to_status`] and nothing else
//! builds a `Status` from a domain error. A class a client must act on but that its gRPC code
//! does not name alone (an unknown worker id is `NOT_FOUND`, like an unknown job) is also named
//! in the status's [`ERROR_CODE_KEY`] metadata; clients read it with [`ErrorCode::of`], never
//! from the message.

/// Error classes of the bookfarm services (a subset of the gRPC codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is malformed or violates a rule (illegal move, score out of range, …).
    InvalidArgument,
    /// The job (or another named thing) is unknown.
    NotFound,
    /// The worker id is unknown (the coordinator restarted, or the session ended): register
    /// again. On the wire: `NOT_FOUND` plus [`ERROR_CODE_KEY`] = `unknown-worker`.
    UnknownWorker,
    /// The caller is in the wrong state (protocol/engine/eval mismatch, job leased to another worker).
    FailedPrecondition,
    /// Missing or wrong authentication token.
    Unauthenticated,
    /// A valid credential without the right to do this (a worker token on an admin RPC, a
    /// blocked credential).
    PermissionDenied,
    /// Too many items in one request, or a limit (sessions, registration rate) reached.
    ResourceExhausted,
    /// The coordinator cannot serve right now (shutting down).
    Unavailable,
    /// A deadline passed.
    DeadlineExceeded,
    /// A bug or a storage failure.
    Internal,
}

impl ErrorCode {
    /// The gRPC status code.
    pub fn grpc_code(self) -> tonic::Code {
        match self {
            ErrorCode::InvalidArgument => tonic::Code::InvalidArgument,
            ErrorCode::NotFound | ErrorCode::UnknownWorker => tonic::Code::NotFound,
            ErrorCode::FailedPrecondition => tonic::Code::FailedPrecondition,
            ErrorCode::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorCode::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorCode::ResourceExhausted => tonic::Code::ResourceExhausted,
            ErrorCode::Unavailable => tonic::Code::Unavailable,
            ErrorCode::DeadlineExceeded => tonic::Code::DeadlineExceeded,
            ErrorCode::Internal => tonic::Code::Internal,
        }
    }

    /// The value of [`ERROR_CODE_KEY`] for the classes the gRPC code does not name alone.
    fn detail(self) -> Option<&'static str> {
        match self {
            ErrorCode::UnknownWorker => Some(UNKNOWN_WORKER),
            _ => None,
        }
    }

    /// The class of a status (built by [`to_status`], or by the transport): its
    /// [`ERROR_CODE_KEY`] metadata when present, else its gRPC code; `None` for a code outside
    /// this set (`UNKNOWN`, `CANCELLED`, …).
    pub fn of(s: &tonic::Status) -> Option<ErrorCode> {
        let detail = s
            .metadata()
            .get(ERROR_CODE_KEY)
            .and_then(|v| v.to_str().ok());
        if detail == Some(UNKNOWN_WORKER) {
            return Some(ErrorCode::UnknownWorker);
        }
        Some(match s.code() {
            tonic::Code::InvalidArgument => ErrorCode::InvalidArgument,
            tonic::Code::NotFound => ErrorCode::NotFound,
            tonic::Code::FailedPrecondition => ErrorCode::FailedPrecondition,
            tonic::Code::Unauthenticated => ErrorCode::Unauthenticated,
            tonic::Code::PermissionDenied => ErrorCode::PermissionDenied,
            tonic::Code::ResourceExhausted => ErrorCode::ResourceExhausted,
            tonic::Code::Unavailable => ErrorCode::Unavailable,
            tonic::Code::DeadlineExceeded => ErrorCode::DeadlineExceeded,
            tonic::Code::Internal => ErrorCode::Internal,
            _ => return None,
        })
    }
}

/// Status metadata key naming an [`ErrorCode`] that the gRPC code does not name alone.
pub const ERROR_CODE_KEY: &str = "bookfarm-error";

/// [`ERROR_CODE_KEY`]'s value for [`ErrorCode::UnknownWorker`].
const UNKNOWN_WORKER: &str = "unknown-worker";

/// An error that knows its gRPC class.
pub trait ServiceError: std::error::Error {
    /// The class of this error.
    fn code(&self) -> ErrorCode;
}

/// Build the `tonic::Status` for a domain error: its code, its display message, and the
/// [`ERROR_CODE_KEY`] metadata of a class the code does not name alone.
pub fn to_status<E: ServiceError + ?Sized>(e: &E) -> tonic::Status {
    let code = e.code();
    let mut s = tonic::Status::new(code.grpc_code(), e.to_string());
    if let Some(d) = code.detail() {
        s.metadata_mut().insert(
            ERROR_CODE_KEY,
            tonic::metadata::MetadataValue::from_static(d),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::ConvertError;

    #[test]
    fn convert_errors_are_invalid_argument() {
        let s = to_status(&ConvertError::MissingField("identity"));
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        assert_eq!(s.message(), "missing field identity");
        assert_eq!(ErrorCode::of(&s), Some(ErrorCode::InvalidArgument));
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Coded(&'static str, ErrorCode);

    impl ServiceError for Coded {
        fn code(&self) -> ErrorCode {
            self.1
        }
    }

    /// An unknown worker is `NOT_FOUND` on the wire and is told from another `NOT_FOUND` by its
    /// metadata, whatever the message says.
    #[test]
    fn an_unknown_worker_is_named_in_the_metadata() {
        let s = to_status(&Coded("gone", ErrorCode::UnknownWorker));
        assert_eq!(s.code(), tonic::Code::NotFound);
        assert_eq!(s.message(), "gone");
        assert_eq!(ErrorCode::of(&s), Some(ErrorCode::UnknownWorker));
        let s = to_status(&Coded(
            "unknown worker 7 (register again)",
            ErrorCode::NotFound,
        ));
        assert_eq!(ErrorCode::of(&s), Some(ErrorCode::NotFound));
        assert!(s.metadata().get(ERROR_CODE_KEY).is_none());
        // The metadata survives the trip through HTTP headers.
        let wire = |s: tonic::Status| {
            let r: tonic::codegen::http::Response<()> = s.into_http();
            tonic::Status::from_header_map(r.headers()).expect("a status")
        };
        assert_eq!(ErrorCode::of(&wire(s)), Some(ErrorCode::NotFound));
        let s = to_status(&Coded("gone", ErrorCode::UnknownWorker));
        assert_eq!(ErrorCode::of(&wire(s)), Some(ErrorCode::UnknownWorker));
        assert_eq!(ErrorCode::of(&tonic::Status::cancelled("x")), None);
    }
}
