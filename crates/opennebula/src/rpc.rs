//! [`OneClient`]: OpenNebula's XML-RPC methods with typed parameters and answers, and
//! the mapping of OpenNebula's answer array into values or classified [`CloudError`]s.
//!
//! Every call sends the session string (`user:password`) first. OpenNebula answers
//! `[true, value, ..]` or `[false, message, code, ..]`; a failure becomes a
//! [`CloudError`] with service `"opennebula"`, operation = the method name
//! (`"one.template.delete"`), message = OpenNebula's message verbatim, and
//! **`status` = OpenNebula's error code** (e.g. `Some(512)` for AUTHORIZATION; read it
//! back with [`one_code`]). The class follows the code:
//!
//! | code | name | class |
//! | --- | --- | --- |
//! | 0x0100 | AUTHENTICATION | Permanent |
//! | 0x0200 | AUTHORIZATION (also a locked object) | Permanent |
//! | 0x0400 | NO_EXISTS | NotFound |
//! | 0x0800 | ACTION (the object's state does not allow it yet) | Conflict |
//! | 0x1000 | XML_RPC_API | Permanent |
//! | 0x2000 | INTERNAL | Transient, but AlreadyExists when the message says "is already taken" |
//! | 0x4000 | ALLOCATE (quota) | Permanent |
//! | 0x8000 | LOCKED | Permanent |
//! | 0x10000 | REPLICATION | Transient (carried with `status: None`: it does not fit) |
//!
//! An answer of any other shape is a Permanent error naming the method and what was
//! wrong; nothing here panics.

use dxr::Value;
use flightdeck_cloud::{CloudError, ErrorClass};

use crate::auth::{OneCredentials, Secret};
use crate::transport::{SERVICE, Transport};
use crate::xml::{self, ImageDoc, TemplateDoc, VmDoc, XmlError};

/// OpenNebula's error codes (`Request::ErrorCode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OneCode {
    Authentication,
    Authorization,
    NoExists,
    Action,
    XmlRpcApi,
    Internal,
    Allocate,
    Locked,
    Replication,
}

impl OneCode {
    pub fn number(self) -> u32 {
        match self {
            OneCode::Authentication => 0x0100,
            OneCode::Authorization => 0x0200,
            OneCode::NoExists => 0x0400,
            OneCode::Action => 0x0800,
            OneCode::XmlRpcApi => 0x1000,
            OneCode::Internal => 0x2000,
            OneCode::Allocate => 0x4000,
            OneCode::Locked => 0x8000,
            OneCode::Replication => 0x1_0000,
        }
    }

    pub fn from_number(n: i64) -> Option<OneCode> {
        [
            OneCode::Authentication,
            OneCode::Authorization,
            OneCode::NoExists,
            OneCode::Action,
            OneCode::XmlRpcApi,
            OneCode::Internal,
            OneCode::Allocate,
            OneCode::Locked,
            OneCode::Replication,
        ]
        .into_iter()
        .find(|c| i64::from(c.number()) == n)
    }

    /// The name OpenNebula's sources give the code.
    pub fn name(self) -> &'static str {
        match self {
            OneCode::Authentication => "AUTHENTICATION",
            OneCode::Authorization => "AUTHORIZATION",
            OneCode::NoExists => "NO_EXISTS",
            OneCode::Action => "ACTION",
            OneCode::XmlRpcApi => "XML_RPC_API",
            OneCode::Internal => "INTERNAL",
            OneCode::Allocate => "ALLOCATE",
            OneCode::Locked => "LOCKED",
            OneCode::Replication => "REPLICATION",
        }
    }

    /// How the engine should treat a failure with this code and `message`.
    pub fn class(self, message: &str) -> ErrorClass {
        match self {
            OneCode::NoExists => ErrorClass::NotFound,
            OneCode::Action => ErrorClass::Conflict,
            // A duplicate name: templates answer INTERNAL "NAME is already taken by
            // TEMPLATE 7.", images ALLOCATE "... NAME is already taken by IMAGE 0.".
            OneCode::Internal | OneCode::Allocate if message.contains("is already taken") => {
                ErrorClass::AlreadyExists
            }
            OneCode::Internal | OneCode::Replication => ErrorClass::Transient,
            OneCode::Authentication
            | OneCode::Authorization
            | OneCode::XmlRpcApi
            | OneCode::Allocate
            | OneCode::Locked => ErrorClass::Permanent,
        }
    }
}

/// The OpenNebula error code an `opennebula` error carries in `status`, if any.
pub fn one_code(err: &CloudError) -> Option<OneCode> {
    if err.service != SERVICE {
        return None;
    }
    OneCode::from_number(i64::from(err.status?))
}

/// The [`CloudError`] for OpenNebula's `[false, message, code, ..]`.
pub fn one_error(method: &str, code: i64, message: &str) -> CloudError {
    let (class, status) = match OneCode::from_number(code) {
        Some(c) => (c.class(message), u16::try_from(c.number()).ok()),
        None => (ErrorClass::Permanent, u16::try_from(code).ok()),
    };
    CloudError::new(class, SERVICE, method, status, message)
}

/// A Permanent error for an answer of the wrong shape.
fn malformed(method: &str, what: impl std::fmt::Display) -> CloudError {
    CloudError::new(
        ErrorClass::Permanent,
        SERVICE,
        method,
        None,
        format!("malformed answer: {what}"),
    )
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Integer(_) => "i4",
        Value::Boolean(_) => "boolean",
        Value::String(_) => "string",
        Value::Double(_) => "double",
        Value::DateTime(_) => "dateTime.iso8601",
        Value::Base64(_) => "base64",
        Value::Struct(_) => "struct",
        Value::Array(_) => "array",
        _ => "unknown type",
    }
}

/// The value of a successful answer, or the error of a failed one.
pub fn decode_answer(method: &str, answer: Value) -> Result<Value, CloudError> {
    let Value::Array(items) = answer else {
        return Err(malformed(
            method,
            format!("expected an array, got a {}", kind(&answer)),
        ));
    };
    let mut items = items.into_iter();
    match items.next() {
        Some(Value::Boolean(true)) => items
            .next()
            .ok_or_else(|| malformed(method, "a success without a value")),
        Some(Value::Boolean(false)) => {
            let message = match items.next() {
                Some(Value::String(m)) => m,
                Some(other) => {
                    return Err(malformed(
                        method,
                        format!("the error message is a {}, not a string", kind(&other)),
                    ));
                }
                None => return Err(malformed(method, "a failure without a message")),
            };
            let code = match items.next() {
                Some(Value::Integer(c)) => i64::from(c),
                Some(other) => {
                    return Err(malformed(
                        method,
                        format!("the error code is a {}, not an i4", kind(&other)),
                    ));
                }
                None => return Err(malformed(method, "a failure without an error code")),
            };
            Err(one_error(method, code, &message))
        }
        Some(other) => Err(malformed(
            method,
            format!("the first element is a {}, not a boolean", kind(&other)),
        )),
        None => Err(malformed(method, "an empty array")),
    }
}

fn as_id(method: &str, v: Value) -> Result<u32, CloudError> {
    match v {
        Value::Integer(i) => {
            u32::try_from(i).map_err(|_| malformed(method, format!("the ID {i} is negative")))
        }
        other => Err(malformed(
            method,
            format!("expected an i4 ID, got a {}", kind(&other)),
        )),
    }
}

fn as_string(method: &str, v: Value) -> Result<String, CloudError> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(malformed(
            method,
            format!("expected a string, got a {}", kind(&other)),
        )),
    }
}

fn xml_error(method: &str, e: XmlError) -> CloudError {
    malformed(method, format!("the XML document: {e}"))
}

/// An ID as XML-RPC sends it (`i4`). OpenNebula's IDs are `int`s.
fn id(v: u32) -> Value {
    Value::Integer(i32::try_from(v).unwrap_or(i32::MAX))
}

/// A `one.*.info` filter: every object the user can see (`-2`), no range (`-1, -1`).
const POOL_ALL: [i32; 3] = [-2, -1, -1];
/// `one.vmpool.info` state filter: every state but DONE.
pub const VM_STATE_ANY_BUT_DONE: i32 = -1;
/// A VM's `STATE` once it is terminated (OpenNebula keeps it in the pool as DONE).
pub const VM_STATE_DONE: i64 = 6;

/// OpenNebula's XML-RPC API as typed methods, over any [`Transport`].
pub struct OneClient<T> {
    transport: T,
    session: Secret,
}

impl<T> std::fmt::Debug for OneClient<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneClient")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> OneClient<T> {
    pub fn new(transport: T, credentials: &OneCredentials) -> Self {
        OneClient {
            transport,
            session: credentials.session(),
        }
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// Calls `method` with the session prepended and decodes the answer.
    pub async fn call(&self, method: &str, params: Vec<Value>) -> Result<Value, CloudError> {
        let mut all = Vec::with_capacity(params.len() + 1);
        all.push(Value::String(self.session.expose().to_string()));
        all.extend(params);
        let answer = self.transport.call(method, all).await?;
        let result = decode_answer(method, answer);
        if let Err(e) = &result {
            tracing::debug!(error = %e, "OpenNebula call failed");
        }
        result
    }

    async fn call_id(&self, method: &str, params: Vec<Value>) -> Result<u32, CloudError> {
        let v = self.call(method, params).await?;
        as_id(method, v)
    }

    async fn call_xml(&self, method: &str, params: Vec<Value>) -> Result<String, CloudError> {
        let v = self.call(method, params).await?;
        as_string(method, v)
    }

    /// `one.template.allocate`: a VM template from template text; the new ID.
    pub async fn template_allocate(&self, template: &str) -> Result<u32, CloudError> {
        self.call_id(
            "one.template.allocate",
            vec![Value::String(template.into())],
        )
        .await
    }

    /// `one.template.info` (not extended, not decrypted).
    pub async fn template_info(&self, template_id: u32) -> Result<TemplateDoc, CloudError> {
        const M: &str = "one.template.info";
        let doc = self
            .call_xml(
                M,
                vec![
                    id(template_id),
                    Value::Boolean(false),
                    Value::Boolean(false),
                ],
            )
            .await?;
        xml::parse_template(&doc).map_err(|e| xml_error(M, e))
    }

    /// `one.template.delete`, keeping the template's images.
    pub async fn template_delete(&self, template_id: u32) -> Result<(), CloudError> {
        self.call_id(
            "one.template.delete",
            vec![id(template_id), Value::Boolean(false)],
        )
        .await
        .map(drop)
    }

    /// `one.template.instantiate`: a VM named `name` from the template, `extra`
    /// merged into it (its user template gets the extra attributes); the new VM's ID.
    pub async fn template_instantiate(
        &self,
        template_id: u32,
        name: &str,
        hold: bool,
        extra: &str,
        persistent: bool,
    ) -> Result<u32, CloudError> {
        self.call_id(
            "one.template.instantiate",
            vec![
                id(template_id),
                Value::String(name.into()),
                Value::Boolean(hold),
                Value::String(extra.into()),
                Value::Boolean(persistent),
            ],
        )
        .await
    }

    /// `one.template.lock` at `level` (1 USE, 2 MANAGE, 3 ADMIN, 4 ALL).
    pub async fn template_lock(&self, template_id: u32, level: i32) -> Result<(), CloudError> {
        self.call_id(
            "one.template.lock",
            vec![
                id(template_id),
                Value::Integer(level),
                Value::Boolean(false),
            ],
        )
        .await
        .map(drop)
    }

    /// `one.template.unlock`.
    pub async fn template_unlock(&self, template_id: u32) -> Result<(), CloudError> {
        self.call_id("one.template.unlock", vec![id(template_id)])
            .await
            .map(drop)
    }

    /// `one.templatepool.info`: every template the user can see.
    pub async fn templatepool_info(&self) -> Result<Vec<TemplateDoc>, CloudError> {
        const M: &str = "one.templatepool.info";
        let doc = self.call_xml(M, pool_params(&[])).await?;
        xml::parse_template_pool(&doc).map_err(|e| xml_error(M, e))
    }

    /// `one.image.allocate` into datastore `datastore_id`; the new ID.
    pub async fn image_allocate(
        &self,
        template: &str,
        datastore_id: u32,
    ) -> Result<u32, CloudError> {
        self.call_id(
            "one.image.allocate",
            vec![Value::String(template.into()), id(datastore_id)],
        )
        .await
    }

    /// `one.image.info` (not decrypted).
    pub async fn image_info(&self, image_id: u32) -> Result<ImageDoc, CloudError> {
        const M: &str = "one.image.info";
        let doc = self
            .call_xml(M, vec![id(image_id), Value::Boolean(false)])
            .await?;
        xml::parse_image(&doc).map_err(|e| xml_error(M, e))
    }

    /// `one.image.delete`, not forced.
    pub async fn image_delete(&self, image_id: u32) -> Result<(), CloudError> {
        self.call_id(
            "one.image.delete",
            vec![id(image_id), Value::Boolean(false)],
        )
        .await
        .map(drop)
    }

    /// `one.imagepool.info`: every image the user can see.
    pub async fn imagepool_info(&self) -> Result<Vec<ImageDoc>, CloudError> {
        const M: &str = "one.imagepool.info";
        let doc = self.call_xml(M, pool_params(&[])).await?;
        xml::parse_image_pool(&doc).map_err(|e| xml_error(M, e))
    }

    /// `one.vm.info` (not decrypted).
    pub async fn vm_info(&self, vm_id: u32) -> Result<VmDoc, CloudError> {
        const M: &str = "one.vm.info";
        let doc = self
            .call_xml(M, vec![id(vm_id), Value::Boolean(false)])
            .await?;
        xml::parse_vm(&doc).map_err(|e| xml_error(M, e))
    }

    /// `one.vm.action`: `action` (`"terminate-hard"`, `"poweroff"`, ...) on the VM. The
    /// action comes before the ID, as OpenNebula wants it.
    pub async fn vm_action(&self, action: &str, vm_id: u32) -> Result<(), CloudError> {
        self.call_id(
            "one.vm.action",
            vec![Value::String(action.into()), id(vm_id)],
        )
        .await
        .map(drop)
    }

    /// `one.vmpool.info` in `state` ([`VM_STATE_ANY_BUT_DONE`] for all living VMs).
    /// OpenNebula lists VMs in a short form: its `TEMPLATE` holds CPU, MEMORY, DISK,
    /// NIC and GRAPHICS only, its `USER_TEMPLATE` only LABELS, ERROR and SCHED_*.
    pub async fn vmpool_info(&self, state: i32) -> Result<Vec<VmDoc>, CloudError> {
        const M: &str = "one.vmpool.info";
        let doc = self.call_xml(M, pool_params(&[state])).await?;
        xml::parse_vm_pool(&doc).map_err(|e| xml_error(M, e))
    }

    /// `one.vmpool.infoextended`: like [`Self::vmpool_info`], with each VM's full
    /// `TEMPLATE` (`TEMPLATE_ID` included).
    pub async fn vmpool_info_extended(&self, state: i32) -> Result<Vec<VmDoc>, CloudError> {
        const M: &str = "one.vmpool.infoextended";
        let doc = self.call_xml(M, pool_params(&[state])).await?;
        xml::parse_vm_pool(&doc).map_err(|e| xml_error(M, e))
    }

    /// `one.system.version`: oned's version, e.g. `"6.10.0"`.
    pub async fn system_version(&self) -> Result<String, CloudError> {
        const M: &str = "one.system.version";
        let v = self.call(M, vec![]).await?;
        as_string(M, v)
    }
}

fn pool_params(extra: &[i32]) -> Vec<Value> {
    POOL_ALL
        .iter()
        .chain(extra)
        .map(|&n| Value::Integer(n))
        .collect()
}

#[cfg(test)]
#[path = "rpc_tests.rs"]
mod tests;
