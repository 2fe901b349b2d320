//! The fuzz targets: one parser each, as flightdeck calls it on input from outside.

use flightdeck_opennebula::rpc::decode_answer;
use flightdeck_opennebula::transport::decode_response;
use flightdeck_opennebula::xml::{parse_document, parse_vm_pool};
use flightdeck_openstack::Service;
use flightdeck_openstack::errors::{classify, parse_fault, parse_retry_after};

/// Whether the target took the input as valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Accepted,
    Rejected,
}

/// A parser to fuzz, with the tokens of its grammar that mutations insert.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]) -> Verdict,
    pub tokens: &'static [&'static [u8]],
}

pub const TARGETS: [Target; 3] = [
    Target {
        name: "spec",
        run: spec,
        tokens: &[
            b"---\n",
            b": ",
            b"\n  ",
            b"\n- ",
            b"- ",
            b"[",
            b"]",
            b"{",
            b"}",
            b", ",
            b"&a ",
            b"*a",
            b"<<: *a\n",
            b"!!str ",
            b"!x ",
            b"|\n  ",
            b">\n  ",
            b"\"",
            b"'",
            b"#",
            b"~",
            b"null",
            b"true",
            b"1e309",
            b"-1",
            b"0x10",
            b"10.0.0.0/8",
            b"::/0",
            b"5m",
            b"kind: Cluster\n",
            b"kind: Scenario\n",
            b"replicas: ",
            b"podCIDR: ",
            b"nodePools:\n  - name: w\n",
            b"\t",
        ],
    },
    Target {
        name: "xmlrpc",
        run: xmlrpc,
        tokens: &[
            b"<value>",
            b"</value>",
            b"<array><data>",
            b"</data></array>",
            b"<struct>",
            b"</struct>",
            b"<member><name>x</name>",
            b"</member>",
            b"<string>",
            b"</string>",
            b"<i4>",
            b"</i4>",
            b"<int>",
            b"</int>",
            b"<boolean>1</boolean>",
            b"<base64>",
            b"<fault>",
            b"</fault>",
            b"&lt;",
            b"&gt;",
            b"&amp;",
            b"&#x0;",
            b"<![CDATA[",
            b"]]>",
            b"&lt;VM&gt;&lt;ID&gt;1&lt;/ID&gt;&lt;/VM&gt;",
            b"<?xml version=\"1.0\"?>",
            b"<!DOCTYPE x [<!ENTITY e \"y\">]>",
            b"&e;",
        ],
    },
    Target {
        name: "openstack-error",
        run: openstack_error,
        tokens: &[
            b"{",
            b"}",
            b"[",
            b"]",
            b"\"message\": ",
            b"\"code\": ",
            b"\"NeutronError\": ",
            b"\"faultstring\": ",
            b"\"error\": ",
            b"null",
            b"1e999",
            b"\\u0000",
            b"\\ud800",
            b"\"",
            b",",
            b":",
            b"-0",
            b"Retry-After",
        ],
    },
];

fn text(input: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(input)
}

/// A spec file, as `validate`, `up` and the daemon's apply read it.
fn spec(input: &[u8]) -> Verdict {
    match flightdeck_spec::load_documents(&text(input), "fuzz.yaml") {
        Ok(_) => Verdict::Accepted,
        Err(e) => {
            // An error is a clear one: it names its document, and says something.
            assert!(!e.message.is_empty(), "an empty error message");
            Verdict::Rejected
        }
    }
}

/// An XML-RPC answer to `one.vmpool.infoextended`, as the OpenNebula client reads it: the
/// methodResponse, the answer array, and the VM pool document inside it.
fn xmlrpc(input: &[u8]) -> Verdict {
    const METHOD: &str = "one.vmpool.infoextended";
    let Ok(value) = decode_response(METHOD, &text(input)) else {
        return Verdict::Rejected;
    };
    let Ok(answer) = decode_answer(METHOD, value) else {
        return Verdict::Rejected;
    };
    let dxr::Value::String(xml) = answer else {
        return Verdict::Rejected;
    };
    let document = parse_document(&xml);
    match (document, parse_vm_pool(&xml)) {
        (Ok(_), Ok(_)) => Verdict::Accepted,
        _ => Verdict::Rejected,
    }
}

/// An OpenStack error body and its Retry-After header, as every client call reads them.
fn openstack_error(input: &[u8]) -> Verdict {
    let body = text(input);
    let fault = parse_fault(&body);
    let _ = parse_retry_after(Some(&body));
    for service in [Service::Nova, Service::Neutron, Service::Octavia] {
        let _ = classify(service, 409, &fault, None);
    }
    // Accepted: the message came out of one of the JSON shapes, not the raw text.
    let raw = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let from_json = fault.kind.is_some()
        || !raw.starts_with(fault.message.trim_end_matches('…'))
        || fault.message.is_empty() && !raw.is_empty();
    if from_json {
        Verdict::Accepted
    } else {
        Verdict::Rejected
    }
}
