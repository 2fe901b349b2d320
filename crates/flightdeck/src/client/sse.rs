//! A server-sent events parser (the `text/event-stream` format): bytes in, messages out.
//! Lines may end in LF, CRLF or CR and may be split anywhere between chunks, even inside
//! a UTF-8 character.

/// The longest line kept; a longer one means the stream is not what it should be.
pub const LINE_MAX: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// A dispatched event: its `event:` type (`message` when absent) and its `data:`
    /// lines joined by newlines.
    Event { kind: String, data: String },
    /// A `:` comment line (keep-alives are empty ones).
    Comment(String),
}

#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    /// The previous chunk ended in CR: an LF starting the next one belongs to it.
    after_cr: bool,
    kind: Option<String>,
    data: Option<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub struct LineTooLong;

impl std::fmt::Display for LineTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the event stream sent a line longer than {LINE_MAX} bytes"
        )
    }
}

impl std::error::Error for LineTooLong {}

impl Parser {
    /// Feeds bytes; returns the messages they complete.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<Message>, LineTooLong> {
        let mut out = Vec::new();
        for &b in chunk {
            let after_cr = std::mem::take(&mut self.after_cr);
            match b {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(m) = self.line_done(&String::from_utf8_lossy(&line)) {
                        out.push(m);
                    }
                }
                _ => {
                    if self.line.len() >= LINE_MAX {
                        return Err(LineTooLong);
                    }
                    self.line.push(b);
                }
            }
        }
        Ok(out)
    }

    fn line_done(&mut self, line: &str) -> Option<Message> {
        if line.is_empty() {
            let kind = self.kind.take();
            let data = self.data.take()?;
            return Some(Message::Event {
                kind: kind.unwrap_or_else(|| "message".into()),
                data,
            });
        }
        if let Some(comment) = line.strip_prefix(':') {
            return Some(Message::Comment(
                comment.strip_prefix(' ').unwrap_or(comment).to_string(),
            ));
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            "event" => self.kind = Some(value.to_string()),
            // `id` and `retry` matter only to reconnecting browsers.
            _ => {}
        }
        None
    }
}
