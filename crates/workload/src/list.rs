//! Bounded, paged lists: every list is read in pages of [`PAGE_ITEMS`] and stops after
//! [`PAGES_MAX`] pages, so one observation never reads without bound.

use std::fmt::Debug;

use flightdeck_cloud::{CloudError, ErrorClass};
use kube::api::{ListParams, ObjectList};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::errors::{self, CallKind};

/// Items asked for per page.
pub const PAGE_ITEMS: u32 = 500;
/// Pages read at most per list: 100 × 500 = 50,000 objects.
pub const PAGES_MAX: usize = 100;

/// Why a list failed.
#[derive(Debug)]
pub enum ListError {
    /// The API's answer or a transport failure.
    Kube(kube::Error),
    /// More than [`PAGES_MAX`] pages: an answer that never ends, or far more objects
    /// than one cluster owns.
    TooLong,
}

impl ListError {
    /// As flightdeck's error (too long is Permanent: reading again will not shorten it).
    pub fn into_cloud(self, service: &'static str, operation: &str) -> CloudError {
        match self {
            ListError::Kube(e) => errors::cloud_error(service, operation, CallKind::Plain, e),
            ListError::TooLong => CloudError::new(
                ErrorClass::Permanent,
                service,
                operation,
                None,
                format!(
                    "the list did not end after {PAGES_MAX} pages of {PAGE_ITEMS}; refusing to read on"
                ),
            ),
        }
    }
}

/// Every object `lp` selects, page after page, at most [`PAGES_MAX`] pages.
pub async fn list_all<K>(api: &Api<K>, lp: &ListParams) -> Result<Vec<K>, ListError>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let mut lp = lp.clone().limit(PAGE_ITEMS);
    let mut items = Vec::new();
    for _ in 0..PAGES_MAX {
        let page: ObjectList<K> = api.list(&lp).await.map_err(ListError::Kube)?;
        items.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => return Ok(items),
        }
    }
    Err(ListError::TooLong)
}
