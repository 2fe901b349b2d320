//! etcd's JSON gateway (`POST /v3/...` on the client port) over a [`GuestEtcd`], for the
//! calls flightdeck makes: member list and remove, status, leadership transfer and
//! alarms. The shapes are a real etcd's (3.4.23, Debian's `etcd-server`, probed on
//! 2026-12-07): 64-bit numbers as decimal strings, the header's fields in snake case
//! and the rest in camel case, absent fields left out (proto3's JSON), an alarm
//! answer without a header, errors as `{"error", "message", "code"}` with the gRPC
//! code and the HTTP status the gateway maps it to.
//!
//! Left out, and said here: `dbSize` and `dbSizeInUse` (the model keeps no keys, so it
//! has no size to tell; proto3 leaves a zero out), and a real etcd without quorum
//! holding a change until its request times out (this answers at once; the wait
//! belongs to whoever serves the gateway on the simulator's clock).

use serde_json::{Value, json};

use super::{Alarm, EtcdRefusal, GuestEtcd, NOT_LEADER};

/// The member a request reached, and what it tells of its cluster.
#[derive(Clone, Copy, Debug)]
pub struct Answering {
    pub cluster_id: u64,
    pub member_id: u64,
    /// The key-value store's revision (a workload cluster's newest resourceVersion).
    pub revision: u64,
    /// The etcd version its static pod runs, e.g. `3.5.12`.
    pub version: &'static str,
}

/// An HTTP status and its JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayAnswer {
    pub status: u16,
    pub body: Value,
}

fn ok(body: Value) -> GatewayAnswer {
    GatewayAnswer { status: 200, body }
}

fn refused(r: &EtcdRefusal) -> GatewayAnswer {
    let (code, status) = r.codes();
    GatewayAnswer {
        status,
        body: json!({"error": r.0, "message": r.0, "code": code}),
    }
}

fn bad_request(message: String) -> GatewayAnswer {
    GatewayAnswer {
        status: 400,
        body: json!({"error": message, "message": message, "code": 3}),
    }
}

fn not_found(path: &str) -> GatewayAnswer {
    GatewayAnswer {
        status: 404,
        body: json!({"error": format!("no etcd gateway call at {path}"), "code": 5}),
    }
}

fn header(e: &GuestEtcd, at: &Answering, revision: bool) -> Value {
    let mut h = json!({
        "cluster_id": at.cluster_id.to_string(),
        "member_id": at.member_id.to_string(),
        "raft_term": e.term().to_string(),
    });
    if revision {
        h["revision"] = json!(at.revision.to_string());
    }
    h
}

fn members(e: &GuestEtcd) -> Value {
    e.members()
        .map(|m| {
            let mut v = json!({"ID": m.id.to_string(), "peerURLs": [m.peer_url]});
            if m.started() {
                v["name"] = json!(m.name);
                v["clientURLs"] = json!([m.client_url]);
            }
            v
        })
        .collect()
}

/// A 64-bit id of the request: a decimal string (as the gateway writes them) or a
/// number.
fn id_field(body: &Value, field: &str) -> Result<u64, GatewayAnswer> {
    match body.get(field) {
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| bad_request(format!("{field}: {s:?} is not a 64-bit id"))),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| bad_request(format!("{field}: {n} is not a 64-bit id"))),
        Some(other) => Err(bad_request(format!("{field}: {other} is not a 64-bit id"))),
        None => Ok(0),
    }
}

fn alarm_name(a: Alarm) -> &'static str {
    match a {
        Alarm::Nospace => "NOSPACE",
        Alarm::Corrupt => "CORRUPT",
    }
}

fn alarms(e: &GuestEtcd) -> Value {
    let list: Vec<Value> = e
        .alarms()
        .map(|(m, a)| json!({"memberID": m.to_string(), "alarm": alarm_name(*a)}))
        .collect();
    if list.is_empty() {
        json!({})
    } else {
        json!({ "alarms": list })
    }
}

fn status(e: &GuestEtcd, at: &Answering) -> Value {
    let mut v = json!({
        "header": header(e, at, true),
        "version": at.version,
        "raftIndex": e.index().to_string(),
        "raftTerm": e.term().to_string(),
        "raftAppliedIndex": e.index().to_string(),
    });
    let mut errors: Vec<String> = Vec::new();
    match e.leader() {
        Some(l) => v["leader"] = json!(l.to_string()),
        None => errors.push(super::NO_LEADER.to_string()),
    }
    for (m, a) in e.alarms() {
        errors.push(format!("memberID:{m} alarm:{} ", alarm_name(*a)));
    }
    if !errors.is_empty() {
        v["errors"] = json!(errors);
    }
    v
}

fn alarm(
    e: &mut GuestEtcd,
    body: &Value,
    alive: impl Fn(u64) -> bool + Copy,
) -> Result<Value, GatewayAnswer> {
    let action = body.get("action").and_then(Value::as_str).unwrap_or("GET");
    if action == "GET" {
        return Ok(alarms(e));
    }
    let member = id_field(body, "memberID")?;
    let kind = match body.get("alarm").and_then(Value::as_str).unwrap_or("NONE") {
        "NOSPACE" => Alarm::Nospace,
        "CORRUPT" => Alarm::Corrupt,
        other => return Err(bad_request(format!("alarm: {other:?} is not an alarm"))),
    };
    e.committable(alive).map_err(|r| refused(&r))?;
    match action {
        "ACTIVATE" => e.raise(member, kind),
        "DEACTIVATE" => e.disarm(member, kind),
        other => {
            return Err(bad_request(format!(
                "action: {other:?} is not GET, ACTIVATE or DEACTIVATE"
            )));
        }
    }
    Ok(alarms(e))
}

/// Answers `POST {path}` with `body`, as the member `at` would: membership and
/// leadership changes go through the model's checks; reads are the member's own.
pub fn answer(
    e: &mut GuestEtcd,
    at: Answering,
    path: &str,
    body: &[u8],
    alive: impl Fn(u64) -> bool + Copy,
) -> GatewayAnswer {
    let body: Value = if body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(body) {
            Ok(v @ Value::Object(_)) => v,
            Ok(other) => return bad_request(format!("the request is not a JSON object: {other}")),
            Err(err) => return bad_request(format!("the request is not JSON: {err}")),
        }
    };
    let result = match path {
        "/v3/cluster/member/list" => {
            Ok(json!({"header": header(e, &at, false), "members": members(e)}))
        }
        "/v3/cluster/member/remove" => id_field(&body, "ID").and_then(|id| {
            e.remove(id, alive).map_err(|r| refused(&r))?;
            Ok(json!({"header": header(e, &at, false), "members": members(e)}))
        }),
        "/v3/maintenance/status" => Ok(status(e, &at)),
        "/v3/maintenance/transfer-leadership" => id_field(&body, "targetID").and_then(|to| {
            if e.leader() != Some(at.member_id) {
                return Err(refused(&EtcdRefusal(NOT_LEADER)));
            }
            e.move_leader(to, alive).map_err(|r| refused(&r))?;
            Ok(json!({}))
        }),
        "/v3/maintenance/alarm" => alarm(e, &body, alive),
        other => Err(not_found(other)),
    };
    result.map_or_else(|a| a, ok)
}

#[cfg(test)]
mod tests {
    use super::super::{EtcdMember, GuestEtcd};
    use super::*;
    use flightdeck_cloud::Timestamp;

    const AT: Answering = Answering {
        cluster_id: 324952591200643719,
        member_id: 3319814642761637952,
        revision: 1,
        version: "3.4.23",
    };

    fn probe() -> GuestEtcd {
        GuestEtcd::init(EtcdMember {
            id: AT.member_id,
            name: "probe".into(),
            peer_url: "http://127.0.0.1:23800".into(),
            client_url: "http://127.0.0.1:23799".into(),
            added_at: Timestamp(0),
        })
    }

    fn call(e: &mut GuestEtcd, path: &str, body: &str) -> (u16, String) {
        let a = answer(e, AT, path, body.as_bytes(), |_| true);
        (a.status, a.body.to_string())
    }

    /// Each answer as the real etcd 3.4.23 gave it, field for field (serde_json writes
    /// an object's keys in order, so the texts compare as JSON values).
    fn same(got: (u16, String), status: u16, want: &str) {
        let want: Value = serde_json::from_str(want).expect("JSON");
        let body: Value = serde_json::from_str(&got.1).expect("JSON");
        assert_eq!((got.0, body), (status, want));
    }

    /// (path, request, status, answer) in the order they were asked of the real etcd.
    const PROBED: [(&str, &str, u16, &str); 6] = [
        (
            "/v3/cluster/member/list",
            "{}",
            200,
            r#"{"header":{"cluster_id":"324952591200643719","member_id":"3319814642761637952","raft_term":"2"},"members":[{"ID":"3319814642761637952","name":"probe","peerURLs":["http://127.0.0.1:23800"],"clientURLs":["http://127.0.0.1:23799"]}]}"#,
        ),
        (
            "/v3/cluster/member/remove",
            r#"{"ID":"123"}"#,
            404,
            r#"{"error":"etcdserver: member not found","message":"etcdserver: member not found","code":5}"#,
        ),
        (
            "/v3/maintenance/transfer-leadership",
            r#"{"targetID":"123"}"#,
            412,
            r#"{"error":"etcdserver: bad leader transferee","message":"etcdserver: bad leader transferee","code":9}"#,
        ),
        (
            "/v3/maintenance/transfer-leadership",
            r#"{"targetID":"3319814642761637952"}"#,
            200,
            "{}",
        ),
        ("/v3/maintenance/alarm", "{}", 200, "{}"),
        (
            "/v3/maintenance/alarm",
            r#"{"action":"ACTIVATE","memberID":"3319814642761637952","alarm":"NOSPACE"}"#,
            200,
            r#"{"alarms":[{"memberID":"3319814642761637952","alarm":"NOSPACE"}]}"#,
        ),
    ];

    #[test]
    fn the_gateway_answers_as_a_real_etcd_did() {
        let mut e = probe();
        for (path, request, status, want) in PROBED {
            same(call(&mut e, path, request), status, want);
        }
        let (status, body) = call(&mut e, "/v3/maintenance/status", "{}");
        let body: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(status, 200);
        assert_eq!(body["leader"], "3319814642761637952");
        assert_eq!(body["header"]["revision"], "1");
        assert_eq!(
            body["errors"],
            json!(["memberID:3319814642761637952 alarm:NOSPACE "])
        );
        same(
            call(
                &mut e,
                "/v3/cluster/member/remove",
                r#"{"ID":"3319814642761637952"}"#,
            ),
            500,
            r#"{"error":"etcdserver: re-configuration failed due to not enough started members","message":"etcdserver: re-configuration failed due to not enough started members","code":2}"#,
        );
    }

    #[test]
    fn a_member_that_never_started_is_listed_without_a_name_and_quorum_is_lost() {
        let mut e = probe();
        e.add(
            EtcdMember {
                id: 347070776088487526,
                name: String::new(),
                peer_url: "http://127.0.0.1:23801".into(),
                client_url: String::new(),
                added_at: Timestamp(0),
            },
            |_| true,
        )
        .expect("added");
        let only_probe = |id: u64| id == AT.member_id;
        e.elect(only_probe);
        let list = answer(&mut e, AT, "/v3/cluster/member/list", b"{}", only_probe);
        assert_eq!(
            list.body["members"][0],
            json!({"ID": "347070776088487526", "peerURLs": ["http://127.0.0.1:23801"]})
        );
        let status = answer(&mut e, AT, "/v3/maintenance/status", b"{}", only_probe);
        assert_eq!(status.body["errors"], json!(["etcdserver: no leader"]));
        assert!(status.body.get("leader").is_none());
        let remove = answer(
            &mut e,
            AT,
            "/v3/cluster/member/remove",
            br#"{"ID":"347070776088487526"}"#,
            only_probe,
        );
        assert_eq!(
            remove.status, 503,
            "no majority to commit it: {:?}",
            remove.body
        );
    }

    #[test]
    fn bad_requests_are_refused_with_the_field_named() {
        let mut e = probe();
        let a = answer(
            &mut e,
            AT,
            "/v3/cluster/member/remove",
            br#"{"ID":"x1"}"#,
            |_| true,
        );
        assert_eq!(a.status, 400);
        assert!(
            a.body["error"]
                .as_str()
                .is_some_and(|m| m.starts_with("ID:")),
            "{}",
            a.body
        );
        let a = answer(&mut e, AT, "/v3/maintenance/status", b"[1]", |_| true);
        assert_eq!(a.status, 400);
        let a = answer(&mut e, AT, "/v3/kv/range", b"{}", |_| true);
        assert_eq!(a.status, 404);
        let a = answer(
            &mut e,
            AT,
            "/v3/maintenance/alarm",
            br#"{"action":"ACTIVATE","memberID":"1","alarm":"LOUD"}"#,
            |_| true,
        );
        assert_eq!(a.status, 400);
    }
}
