//! How OpenNebula answers (`Request::success_response`, `Request::failure_response`,
//! `Request::failure_message` in `src/rm/Request.cc`), and the faults xmlrpc-c answers
//! before OpenNebula sees a call.

use dxr::Value;

/// `Request::ErrorCode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    Authentication = 0x0100,
    Authorization = 0x0200,
    NoExists = 0x0400,
    Action = 0x0800,
    XmlRpcApi = 0x1000,
    Internal = 0x2000,
    Allocate = 0x4000,
}

/// xmlrpc-c's `fault::CODE_TYPE`: a parameter is missing or of the wrong type.
pub(crate) const FAULT_TYPE: i32 = -501;
/// xmlrpc-c's "no such method".
pub(crate) const FAULT_NO_SUCH_METHOD: i32 = -506;

/// An object kind as `Request::object_name` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Template,
    Image,
    Vm,
    Datastore,
}

impl Kind {
    /// `Request::object_name`.
    pub(crate) fn object_name(self) -> &'static str {
        match self {
            Kind::Template => "virtual machine template",
            Kind::Image => "image",
            Kind::Vm => "virtual machine",
            Kind::Datastore => "datastore",
        }
    }

    /// `PoolObjectSQL::type_to_str`, as authorization messages name it.
    pub(crate) fn type_str(self) -> &'static str {
        match self {
            Kind::Template => "TEMPLATE",
            Kind::Image => "IMAGE",
            Kind::Vm => "VM",
            Kind::Datastore => "DATASTORE",
        }
    }
}

/// A call's failure: either OpenNebula's `[false, message, code, id, 0]` or an xmlrpc-c
/// fault (the call never reached OpenNebula).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Failure {
    One {
        code: Code,
        message: String,
        id: i32,
    },
    Fault {
        code: i32,
        message: String,
    },
}

impl Failure {
    /// A failure whose message is `[method] ` + `tail`, with no object id.
    pub(crate) fn new(method: &str, code: Code, tail: impl AsRef<str>) -> Failure {
        Failure::One {
            code,
            message: format!("[{method}] {}", tail.as_ref()),
            id: -1,
        }
    }

    pub(crate) fn with_id(self, object: i32) -> Failure {
        match self {
            Failure::One { code, message, .. } => Failure::One {
                code,
                message,
                id: object,
            },
            f => f,
        }
    }

    pub(crate) fn authentication(method: &str) -> Failure {
        Failure::new(
            method,
            Code::Authentication,
            "User couldn't be authenticated, aborting call.",
        )
    }

    /// `NO_EXISTS`: `[method] Error getting <object name> [<id>].`
    pub(crate) fn no_exists(method: &str, kind: Kind, id: i32) -> Failure {
        Failure::new(
            method,
            Code::NoExists,
            format!("Error getting {} [{id}].", kind.object_name()),
        )
        .with_id(id)
    }

    /// A lock denies the operation (`AuthManager`, oneadmin's branch):
    /// `[method] User [0] : <TYPE> is locked. [<id>].`
    pub(crate) fn locked(method: &str, uid: u32, kind: Kind, id: u32) -> Failure {
        Failure::new(
            method,
            Code::Authorization,
            format!("User [{uid}] : {} is locked. [{id}].", kind.type_str()),
        )
    }

    /// `ALLOCATE`: `[method] Error allocating a new <object name>. <detail>`
    pub(crate) fn allocate(method: &str, kind: Kind, detail: &str) -> Failure {
        let tail = if detail.is_empty() {
            format!("Error allocating a new {}.", kind.object_name())
        } else {
            format!("Error allocating a new {}. {detail}", kind.object_name())
        };
        Failure::new(method, Code::Allocate, tail)
    }

    pub(crate) fn type_fault(message: &str) -> Failure {
        Failure::Fault {
            code: FAULT_TYPE,
            message: message.into(),
        }
    }

    /// The response array (or fault struct) the call answers.
    pub(crate) fn to_value(&self) -> Value {
        match self {
            Failure::One { code, message, id } => Value::Array(vec![
                Value::Boolean(false),
                Value::String(message.clone()),
                Value::Integer(*code as i32),
                Value::Integer(*id),
                Value::Integer(0),
            ]),
            Failure::Fault { code, message } => fault(*code, message),
        }
    }
}

/// An XML-RPC fault as a value: the struct `{faultCode, faultString}` a `<fault>`
/// response carries. A normal OpenNebula answer is always an array, so whoever serves
/// [`crate::SimCloud::one_call`] over HTTP sends a struct as `<fault>`.
pub(crate) fn fault(code: i32, message: &str) -> Value {
    let mut members = std::collections::BTreeMap::new();
    members.insert("faultCode".to_string(), Value::Integer(code));
    members.insert("faultString".to_string(), Value::String(message.into()));
    Value::Struct(members)
}

pub(crate) fn ok_int(v: i32) -> Value {
    Value::Array(vec![
        Value::Boolean(true),
        Value::Integer(v),
        Value::Integer(0),
    ])
}

pub(crate) fn ok_string(v: String) -> Value {
    Value::Array(vec![
        Value::Boolean(true),
        Value::String(v),
        Value::Integer(0),
    ])
}

pub(crate) type OneResult<T> = std::result::Result<T, Failure>;
