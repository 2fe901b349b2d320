use super::*;

fn class_of(service: Service, status: u16, body: &str) -> ErrorClass {
    http_error(service, "OP /x", status, None, body).class
}

#[test]
fn nova_item_not_found_is_not_found_with_novas_message() {
    let body = r#"{"itemNotFound": {"code": 404, "message": "Instance abc could not be found."}}"#;
    let e = http_error(
        Service::Nova,
        "DELETE /servers/{server_id}",
        404,
        None,
        body,
    );
    assert_eq!(e.class, ErrorClass::NotFound);
    assert_eq!(e.service, "nova");
    assert_eq!(e.operation, "DELETE /servers/{server_id}");
    assert_eq!(e.status, Some(404));
    assert_eq!(e.message, "Instance abc could not be found.");
}

#[test]
fn nova_bad_request_is_permanent() {
    let body = r#"{"badRequest": {"code": 400, "message": "Invalid imageRef provided."}}"#;
    let e = http_error(Service::Nova, "POST /servers", 400, None, body);
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.message, "Invalid imageRef provided.");
}

#[test]
fn nova_conflicting_request_while_busy_is_conflict_else_permanent() {
    let busy = r#"{"conflictingRequest": {"code": 409, "message": "Cannot 'addSecurityGroup' instance abc while it is in task_state deleting"}}"#;
    assert_eq!(class_of(Service::Nova, 409, busy), ErrorClass::Conflict);
    let ambiguous = r#"{"conflictingRequest": {"code": 409, "message": "Multiple security_group matches found for name 'sg', use an ID to be more specific."}}"#;
    assert_eq!(
        class_of(Service::Nova, 409, ambiguous),
        ErrorClass::Permanent
    );
}

#[test]
fn nova_quota_forbidden_is_permanent() {
    let body = r#"{"forbidden": {"code": 403, "message": "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances"}}"#;
    let e = http_error(Service::Nova, "POST /servers", 403, None, body);
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(e.message.starts_with("Quota exceeded"));
}

#[test]
fn neutron_rule_exists_is_already_exists() {
    let body = r#"{"NeutronError": {"type": "SecurityGroupRuleExists", "message": "Security group rule already exists. Rule id is 5f2b.", "detail": ""}}"#;
    let e = http_error(
        Service::Neutron,
        "POST /v2.0/security-group-rules",
        409,
        None,
        body,
    );
    assert_eq!(e.class, ErrorClass::AlreadyExists);
    assert_eq!(
        e.message,
        "Security group rule already exists. Rule id is 5f2b."
    );
}

#[test]
fn neutron_group_in_use_is_conflict() {
    let body = r#"{"NeutronError": {"type": "SecurityGroupInUse", "message": "Security Group 1 in use.", "detail": ""}}"#;
    assert_eq!(class_of(Service::Neutron, 409, body), ErrorClass::Conflict);
}

#[test]
fn neutron_routes_exhausted_is_permanent_and_keeps_the_message() {
    let body = r#"{"NeutronError": {"type": "RoutesExhausted", "message": "Unable to complete operation for r1. The number of routes exceeds the maximum 30.", "detail": ""}}"#;
    let e = http_error(
        Service::Neutron,
        "PUT /v2.0/routers/{router_id}/add_extraroutes",
        400,
        None,
        body,
    );
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(
        e.message,
        "Unable to complete operation for r1. The number of routes exceeds the maximum 30."
    );
}

#[test]
fn neutron_over_quota_conflict_is_permanent() {
    let body = r#"{"NeutronError": {"type": "OverQuota", "message": "Quota exceeded for resources: ['security_group'].", "detail": ""}}"#;
    assert_eq!(class_of(Service::Neutron, 409, body), ErrorClass::Permanent);
}

#[test]
fn neutron_not_found_type_is_not_found() {
    let body = r#"{"NeutronError": {"type": "SecurityGroupNotFound", "message": "Security group x does not exist", "detail": ""}}"#;
    assert_eq!(class_of(Service::Neutron, 404, body), ErrorClass::NotFound);
}

#[test]
fn octavia_immutable_is_conflict() {
    let body = r#"{"faultcode": "Client", "faultstring": "Load Balancer 123 is immutable and cannot be updated.", "debuginfo": null}"#;
    let e = http_error(
        Service::Octavia,
        "POST /v2/lbaas/listeners",
        409,
        None,
        body,
    );
    assert_eq!(e.class, ErrorClass::Conflict);
    assert_eq!(
        e.message,
        "Load Balancer 123 is immutable and cannot be updated."
    );
}

#[test]
fn octavia_duplicate_is_already_exists() {
    let body = r#"{"faultcode": "Client", "faultstring": "Another Listener on this Load Balancer is already using protocol_port 6443", "debuginfo": null}"#;
    assert_eq!(
        class_of(Service::Octavia, 409, body),
        ErrorClass::AlreadyExists
    );
}

#[test]
fn octavia_quota_is_permanent() {
    let body = r#"{"faultcode": "Client", "faultstring": "Quota has been met for resources: Load Balancer", "debuginfo": null}"#;
    assert_eq!(class_of(Service::Octavia, 403, body), ErrorClass::Permanent);
}

#[test]
fn keystone_error_body_gives_its_message() {
    let body = r#"{"error": {"code": 401, "title": "Unauthorized", "message": "The request you have made requires authentication."}}"#;
    let e = http_error(Service::Keystone, "POST /v3/auth/tokens", 401, None, body);
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(
        e.message,
        "The request you have made requires authentication."
    );
}

#[test]
fn rate_limited_carries_retry_after_seconds() {
    let e = http_error(Service::Nova, "GET /servers/detail", 429, Some("7"), "");
    assert_eq!(
        e.class,
        ErrorClass::RateLimited(Some(Duration::from_secs(7)))
    );
    assert_eq!(e.message, "HTTP 429");
    let e = http_error(Service::Nova, "GET /servers/detail", 429, None, "");
    assert_eq!(e.class, ErrorClass::RateLimited(None));
    let e = http_error(Service::Nova, "GET /servers/detail", 429, Some("soon"), "");
    assert_eq!(e.class, ErrorClass::RateLimited(None));
    let e = http_error(
        Service::Nova,
        "GET /servers/detail",
        429,
        Some("99999999999"),
        "",
    );
    assert_eq!(
        e.class,
        ErrorClass::RateLimited(Some(Duration::from_secs(86_400)))
    );
}

#[test]
fn server_errors_are_transient_and_plain_text_is_kept() {
    let body =
        "<html><body><h1>503 Service Unavailable</h1>\n No server is available.</body></html>";
    let e = http_error(Service::Glance, "GET /v2/images", 503, None, body);
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(e.message.contains("No server is available."));
    assert!(!e.message.contains('\n'));
}

#[test]
fn other_client_errors_are_permanent() {
    assert_eq!(class_of(Service::Nova, 400, "{}"), ErrorClass::Permanent);
    assert_eq!(class_of(Service::Neutron, 403, ""), ErrorClass::Permanent);
    assert_eq!(class_of(Service::Octavia, 401, ""), ErrorClass::Permanent);
    assert_eq!(class_of(Service::Glance, 409, ""), ErrorClass::Permanent);
}

#[test]
fn long_plain_bodies_are_shortened_on_a_char_boundary() {
    let body = "é".repeat(600);
    let f = parse_fault(&body);
    assert!(f.message.len() <= RAW_MESSAGE_MAX + '…'.len_utf8());
    assert!(f.message.ends_with('…'));
}
