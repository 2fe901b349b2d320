use super::*;

fn failure(message: &str, code: i32) -> Value {
    Value::Array(vec![
        Value::Boolean(false),
        Value::String(message.into()),
        Value::Integer(code),
        Value::Integer(-1),
        Value::Integer(0),
    ])
}

#[test]
fn every_error_code_maps_to_its_class_and_is_kept_in_status() {
    let cases = [
        (
            0x0100,
            "[one.vm.info] User couldn't be authenticated, aborting call.",
            ErrorClass::Permanent,
            Some(OneCode::Authentication),
        ),
        (
            0x0200,
            "[one.template.delete] User [0] : TEMPLATE is locked.",
            ErrorClass::Permanent,
            Some(OneCode::Authorization),
        ),
        (
            0x0400,
            "[one.vm.action] Error getting virtual machine [99].",
            ErrorClass::NotFound,
            Some(OneCode::NoExists),
        ),
        (
            0x0800,
            "[one.vm.action] Wrong state to perform action",
            ErrorClass::Conflict,
            Some(OneCode::Action),
        ),
        (
            0x1000,
            "[one.vm.action] Invalid action",
            ErrorClass::Permanent,
            Some(OneCode::XmlRpcApi),
        ),
        (
            0x2000,
            "[one.template.allocate] NAME is already taken by VMTEMPLATE 7.",
            ErrorClass::AlreadyExists,
            Some(OneCode::Internal),
        ),
        (
            0x2000,
            "[one.vm.action] Could not terminate the VM: database is busy",
            ErrorClass::Transient,
            Some(OneCode::Internal),
        ),
        (
            0x4000,
            "[one.template.instantiate] User quota exceeded",
            ErrorClass::Permanent,
            Some(OneCode::Allocate),
        ),
        (
            0x8000,
            "[one.image.delete] IMAGE is locked.",
            ErrorClass::Permanent,
            Some(OneCode::Locked),
        ),
        (
            0x1_0000,
            "[one.vm.action] Cannot replicate log record",
            ErrorClass::Transient,
            None,
        ),
        (0x7777, "something new", ErrorClass::Permanent, None),
    ];
    for (code, message, class, read_back) in cases {
        let e = decode_answer("one.x", failure(message, code)).expect_err(message);
        assert_eq!(e.class, class, "{message}");
        assert_eq!(e.service, "opennebula");
        assert_eq!(e.operation, "one.x");
        assert_eq!(e.message, message, "OpenNebula's message is kept verbatim");
        assert_eq!(one_code(&e), read_back, "{message}");
    }
}

#[test]
fn a_locked_template_delete_reads_back_as_authorization_with_status_512() {
    let e = decode_answer(
        "one.template.delete",
        failure(
            "[one.template.delete] User [0] : TEMPLATE is locked.",
            0x200,
        ),
    )
    .expect_err("locked");
    assert_eq!(e.status, Some(512));
    assert_eq!(one_code(&e), Some(OneCode::Authorization));
}

#[test]
fn a_success_yields_its_value() {
    let ok = Value::Array(vec![
        Value::Boolean(true),
        Value::Integer(17),
        Value::Integer(0),
    ]);
    assert_eq!(
        decode_answer("one.template.allocate", ok),
        Ok(Value::Integer(17))
    );
}

#[test]
fn malformed_answers_are_permanent_and_say_what_was_wrong() {
    let cases = [
        (Value::String("x".into()), "expected an array, got a string"),
        (Value::Array(vec![]), "an empty array"),
        (Value::Array(vec![Value::Integer(1)]), "not a boolean"),
        (
            Value::Array(vec![Value::Boolean(true)]),
            "a success without a value",
        ),
        (
            Value::Array(vec![Value::Boolean(false)]),
            "without a message",
        ),
        (
            Value::Array(vec![Value::Boolean(false), Value::Integer(3)]),
            "message is a i4",
        ),
        (
            Value::Array(vec![Value::Boolean(false), Value::String("m".into())]),
            "without an error code",
        ),
        (
            Value::Array(vec![
                Value::Boolean(false),
                Value::String("m".into()),
                Value::String("256".into()),
            ]),
            "error code is a string",
        ),
    ];
    for (answer, want) in cases {
        let e = decode_answer("one.vm.info", answer).expect_err(want);
        assert_eq!(e.class, ErrorClass::Permanent);
        assert_eq!(e.operation, "one.vm.info");
        assert!(e.message.contains(want), "{}: {want}", e.message);
    }
    assert!(as_id("m", Value::Integer(-1)).is_err());
    assert!(as_id("m", Value::String("1".into())).is_err());
}

#[test]
fn other_services_carry_no_opennebula_code() {
    let e = CloudError::new(ErrorClass::Permanent, "nova", "GET /x", Some(512), "m");
    assert_eq!(one_code(&e), None);
}
