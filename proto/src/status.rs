//! The single mapping from domain errors to `tonic::Status`.
//!
//! Every service error implements [`ServiceError`]; handlers call [`to_status`] and nothing else
//! builds a `Status` from a domain error.

/// Error classes of the bookfarm services (a subset of the gRPC codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is malformed or violates a rule (illegal move, score out of range, …).
    InvalidArgument,
    /// The job or worker is unknown.
    NotFound,
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
            ErrorCode::NotFound => tonic::Code::NotFound,
            ErrorCode::FailedPrecondition => tonic::Code::FailedPrecondition,
            ErrorCode::Unauthenticated => tonic::Code::Unauthenticated,
            ErrorCode::PermissionDenied => tonic::Code::PermissionDenied,
            ErrorCode::ResourceExhausted => tonic::Code::ResourceExhausted,
            ErrorCode::Unavailable => tonic::Code::Unavailable,
            ErrorCode::DeadlineExceeded => tonic::Code::DeadlineExceeded,
            ErrorCode::Internal => tonic::Code::Internal,
        }
    }
}

/// An error that knows its gRPC class.
pub trait ServiceError: std::error::Error {
    /// The class of this error.
    fn code(&self) -> ErrorCode;
}

/// Build the `tonic::Status` for a domain error: its code and its display message.
pub fn to_status<E: ServiceError + ?Sized>(e: &E) -> tonic::Status {
    tonic::Status::new(e.code().grpc_code(), e.to_string())
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
    }
}
