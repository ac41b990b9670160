//! Server-sent events, as the model providers stream them: bytes arrive in arbitrary pieces
//! (inside a UTF-8 character, inside a JSON string); an event ends at a blank line; its
//! `data:` lines joined by newlines are its payload. Bytes are only decoded once an event is
//! complete, so a split character is never mangled.

#[derive(Debug, Default)]
pub struct SseParser {
    buffer: Vec<u8>,
}

/// One complete event.
#[derive(Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

impl SseParser {
    /// Adds received bytes; returns the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some((end, separator)) = find_event_end(&self.buffer) {
            let mut raw: Vec<u8> = self.buffer.drain(..end + separator).collect();
            raw.truncate(end);
            let text = String::from_utf8_lossy(&raw);
            let mut event = None;
            let mut data: Vec<&str> = Vec::new();
            for line in text.lines() {
                if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value));
                } else if let Some(value) = line.strip_prefix("event:") {
                    event = Some(value.trim().to_owned());
                }
                // `id:`, `retry:` and `:` comments are not used by the providers' streams.
            }
            if !data.is_empty() || event.is_some() {
                events.push(SseEvent {
                    event,
                    data: data.join("\n"),
                });
            }
        }
        events
    }
}

/// Where the first complete event ends: (index of its end, length of the blank-line separator).
fn find_event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    (0..buffer.len()).find_map(|i| {
        let rest = buffer.get(i..)?;
        if rest.starts_with(b"\r\n\r\n") {
            Some((i, 4))
        } else if rest.starts_with(b"\n\n") {
            Some((i, 2))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_survive_any_split() {
        let stream =
            "data: {\"a\":\"é€\"}\n\nevent: ping\ndata: x\r\n\r\n: comment\n\ndata: [DONE]\n\n"
                .as_bytes();
        let whole = SseParser::default().push(stream);
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0].data, "{\"a\":\"é€\"}");
        assert_eq!(whole[1].event.as_deref(), Some("ping"));
        assert_eq!(whole[2].data, "[DONE]");
        // Every split point, including inside the multi-byte characters, gives the same events.
        for cut in 1..stream.len() {
            let mut parser = SseParser::default();
            let mut events = parser.push(&stream[..cut]);
            events.extend(parser.push(&stream[cut..]));
            assert_eq!(events, whole, "split at {cut}");
        }
    }
}
