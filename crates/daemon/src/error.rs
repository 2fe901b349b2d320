//! API failures: a status code and a message that says what is wrong.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::types::{ApiError, Problem};

#[derive(Debug, Clone)]
pub struct Failure {
    pub status: StatusCode,
    pub message: String,
    pub problems: Vec<Problem>,
}

impl Failure {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Failure {
            status,
            message: message.into(),
            problems: Vec::new(),
        }
    }
    pub fn not_found(cluster: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            format!("cluster {cluster} is not known to this flightdeck"),
        )
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }
    pub fn gateway(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }
    /// A store's failure as the API answers it: 503 when the store did not answer (etcd
    /// without a quorum, a member changing leader: try again), 409 when another replica
    /// holds or changed what the request touched, 500 when what is stored is damaged.
    pub fn store(e: flightdeck_store::StoreError) -> Self {
        use flightdeck_store::StoreError as E;
        match e {
            E::Backend { .. } => Self::unavailable(format!("{e}; try again shortly")),
            E::Fenced { .. } | E::Conflict { .. } => Self::conflict(e.to_string()),
            E::Damaged { .. } | E::Corrupt { .. } => Self::internal(e.to_string()),
        }
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let body = ApiError {
            error: self.message,
            problems: self.problems,
        };
        (self.status, Json(body)).into_response()
    }
}
