use crate::client::sse::{LINE_MAX, Message, Parser};

fn event(kind: &str, data: &str) -> Message {
    Message::Event {
        kind: kind.into(),
        data: data.into(),
    }
}

#[test]
fn messages_come_out_whole_however_the_bytes_are_cut() {
    let stream = "event: event\ndata: {\"a\":1}\n\n:\n\n: 3 events were missed\n\ndata: x\r\ndata: y\r\n\r\nevent: other\rdata: é\r\r";
    let want = vec![
        event("event", "{\"a\":1}"),
        Message::Comment(String::new()),
        Message::Comment("3 events were missed".into()),
        event("message", "x\ny"),
        event("other", "é"),
    ];
    // Whole, and cut at every byte (inside the CRLF pairs and inside the `é`).
    let mut p = Parser::default();
    assert_eq!(p.push(stream.as_bytes()).expect("parses"), want);
    for cut in 0..stream.len() {
        let (a, b) = stream.as_bytes().split_at(cut);
        let mut p = Parser::default();
        let mut got = p.push(a).expect("parses");
        got.extend(p.push(b).expect("parses"));
        assert_eq!(got, want, "cut at {cut}");
    }
}

#[test]
fn fields_follow_the_event_stream_rules() {
    let mut p = Parser::default();
    // No space after the colon; an unknown field; `id`; a data line with no value;
    // an event type without data dispatches nothing and is forgotten.
    let got = p
        .push(b"event: lonely\n\ndata:x\nid: 7\nretry: 10\nfoo: bar\ndata\n\n")
        .expect("parses");
    assert_eq!(got, vec![event("message", "x\n")]);
    // An unfinished message stays inside until its blank line arrives.
    assert_eq!(p.push(b"data: half").expect("parses"), vec![]);
    assert_eq!(
        p.push(b"\n\n").expect("parses"),
        vec![event("message", "half")]
    );
}

#[test]
fn an_endless_line_is_refused() {
    let mut p = Parser::default();
    let chunk = vec![b'a'; LINE_MAX + 1];
    assert!(p.push(&chunk).is_err());
}
