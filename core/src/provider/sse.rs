//! An incremental decoder for server-sent events (the WHATWG "event stream" format).
//!
//! Bytes go in as they arrive, in chunks of any size: a chunk may end inside a line, inside a
//! CRLF pair or inside a UTF-8 sequence. Lines end with CRLF, LF or CR; a leading byte-order
//! mark is dropped; lines starting with `:` are comments (keep-alives such as OpenRouter's
//! `: OPENROUTER PROCESSING`); several `data:` lines make one event joined with `\n`; an empty
//! line dispatches the event. Invalid UTF-8 becomes U+FFFD, as the standard says.
//!
//! One deliberate difference from a browser's `EventSource`: [`SseDecoder::finish`] treats the
//! end of the stream as the end of the last line and event, so an event whose final blank line
//! never came is still delivered. The codecs decide for themselves whether a stream was complete
//! (OpenAI's `[DONE]`, Anthropic's `message_stop`), so this only makes the error they report
//! more precise (a truncated JSON event rather than a missing one).

use serde::{Deserialize, Serialize};

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SseEvent {
    /// The `event:` field, `"message"` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` seen so far in the stream, if any.
    pub id: Option<String>,
}

/// The decoder's state between chunks.
#[derive(Debug, Clone, Default)]
pub struct SseDecoder {
    /// The bytes of the line not yet ended.
    line: Vec<u8>,
    /// The last line ended with CR: an LF that follows belongs to it.
    after_cr: bool,
    /// The first line has been seen (the byte-order mark can only precede it).
    started: bool,
    /// The `event:` field of the event being built.
    event: String,
    /// The data buffer: each `data:` line's value followed by `\n`.
    data: String,
    /// The last event id (it carries over from event to event, as the standard says).
    last_id: Option<String>,
    /// The last valid `retry:` value, in milliseconds.
    retry_ms: Option<u64>,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes; returns the events they completed, in order.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        let mut rest = bytes;
        while let Some(&first) = rest.first() {
            if self.after_cr {
                self.after_cr = false;
                if first == b'\n' {
                    rest = &rest[1..];
                    continue;
                }
            }
            match rest.iter().position(|&byte| byte == b'\n' || byte == b'\r') {
                None => {
                    self.line.extend_from_slice(rest);
                    break;
                }
                Some(end) => {
                    self.line.extend_from_slice(&rest[..end]);
                    self.after_cr = rest[end] == b'\r';
                    rest = &rest[end + 1..];
                    let line = std::mem::take(&mut self.line);
                    self.line_ended(&line, &mut events);
                }
            }
        }
        events
    }

    /// The stream ended: an unterminated last line is taken as a line, and a pending event
    /// is dispatched. The decoder is then ready for a new stream (the last event id is kept).
    pub fn finish(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_ended(&line, &mut events);
        }
        self.dispatch(&mut events);
        self.after_cr = false;
        self.started = false;
        events
    }

    /// The reconnection time the stream asked for with `retry:`, in milliseconds.
    #[must_use]
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Whether bytes of an unfinished line or event are pending.
    #[must_use]
    pub fn has_pending(&self) -> bool {
        !self.line.is_empty() || !self.data.is_empty()
    }

    fn line_ended(&mut self, line: &[u8], events: &mut Vec<SseEvent>) {
        let mut line = line;
        if !self.started {
            self.started = true;
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(events);
            return;
        }
        if line[0] == b':' {
            return;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.find(':') {
            Some(colon) => {
                let value = &text[colon + 1..];
                (&text[..colon], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&*text, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
    }

    fn dispatch(&mut self, events: &mut Vec<SseEvent>) {
        let event = std::mem::take(&mut self.event);
        let mut data = std::mem::take(&mut self.data);
        if data.is_empty() {
            return;
        }
        data.pop(); // the `\n` after the last data line
        events.push(SseEvent {
            event: if event.is_empty() { "message".to_owned() } else { event },
            data,
            id: self.last_id.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    pub(super) fn decode(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        for chunk in chunks {
            events.extend(decoder.feed(chunk));
        }
        events.extend(decoder.finish());
        events
    }

    fn data(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|event| event.data.as_str()).collect()
    }

    fn message(data: &str) -> SseEvent {
        SseEvent { event: "message".into(), data: data.into(), id: None }
    }

    #[test]
    fn data_lines_make_events() {
        assert_eq!(decode(&[b"data: a\n\ndata: b\n\n"]), vec![message("a"), message("b")]);
    }

    #[test]
    fn every_line_ending_works() {
        for stream in [
            &b"data: a\n\ndata: b\n\n"[..],
            b"data: a\r\n\r\ndata: b\r\n\r\n",
            b"data: a\r\rdata: b\r\r",
            b"data: a\r\n\ndata: b\n\r\n",
        ] {
            assert_eq!(data(&decode(&[stream])), ["a", "b"], "{stream:?}");
        }
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_ending() {
        // CR at the end of one chunk, LF at the start of the next: one line ending, not an
        // empty line (which would dispatch the event early).
        let events = decode(&[b"data: a\r", b"\ndata: b\r\n\r\n"]);
        assert_eq!(data(&events), ["a\nb"]);
        // An empty chunk between them changes nothing.
        let events = decode(&[b"data: a\r", b"", b"\ndata: b\r\n\r\n"]);
        assert_eq!(data(&events), ["a\nb"]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let events = decode(&[b"data: one\ndata:two\ndata:  three\ndata\n\n"]);
        assert_eq!(data(&events), ["one\ntwo\n three\n"]);
    }

    #[test]
    fn comments_and_unknown_fields_are_ignored() {
        let events = decode(&[b": keep-alive\n: OPENROUTER PROCESSING\n\nfoo: bar\ndata: x\n\n"]);
        assert_eq!(events, vec![message("x")]);
    }

    #[test]
    fn event_names_and_ids() {
        let events = decode(&[b"event: ping\nid: 7\ndata: {}\n\ndata: y\n\nid\ndata: z\n\n"]);
        assert_eq!(
            events,
            vec![
                SseEvent { event: "ping".into(), data: "{}".into(), id: Some("7".into()) },
                SseEvent { event: "message".into(), data: "y".into(), id: Some("7".into()) },
                SseEvent { event: "message".into(), data: "z".into(), id: Some(String::new()) },
            ]
        );
        // An id containing NUL is ignored.
        let events = decode(&[b"id: 1\n\nid: a\0b\ndata: q\n\n"]);
        assert_eq!(events[0].id.as_deref(), Some("1"));
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_its_name_does_not_leak() {
        let events = decode(&[b"event: lonely\n\ndata: x\n\n"]);
        assert_eq!(events, vec![message("x")]);
    }

    #[test]
    fn empty_data_still_dispatches() {
        assert_eq!(decode(&[b"data\n\ndata:\n\n"]), vec![message(""), message("")]);
    }

    #[test]
    fn retry_is_read_when_numeric() {
        let mut decoder = SseDecoder::new();
        decoder.feed(b"retry: 1500\n\nretry: soon\n\n");
        assert_eq!(decoder.retry_ms(), Some(1500));
    }

    #[test]
    fn a_byte_order_mark_is_dropped_even_when_split() {
        let events = decode(&[b"\xEF", b"\xBB", b"\xBFdata: x\n\n"]);
        assert_eq!(events, vec![message("x")]);
        // Only at the start of the stream.
        let events = decode(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]);
        assert_eq!(data(&events), ["a"]);
    }

    #[test]
    fn utf8_split_inside_a_character_survives() {
        let text = "data: héllo ✓ 🦀\n\n".as_bytes();
        for cut in 0..text.len() {
            let events = decode(&[&text[..cut], &text[cut..]]);
            assert_eq!(data(&events), ["héllo ✓ 🦀"], "cut at {cut}");
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        let events = decode(&[b"data: a\xFFb\n\n"]);
        assert_eq!(data(&events), ["a\u{FFFD}b"]);
    }

    #[test]
    fn the_end_of_the_stream_ends_the_last_event() {
        assert_eq!(data(&decode(&[b"data: [DONE]"])), ["[DONE]"]);
        assert_eq!(data(&decode(&[b"data: [DONE]\n"])), ["[DONE]"]);
        assert!(decode(&[b": only a comment"]).is_empty());
        let mut decoder = SseDecoder::new();
        assert!(decoder.feed(b"data: x").is_empty());
        assert!(decoder.has_pending());
    }

    #[test]
    fn byte_by_byte_equals_one_chunk() {
        let stream = b"event: a\r\ndata: 1\r\n\r\n: c\rdata: 2\rdata: 3\r\r\ndata: \xC3\xA9\n\n";
        let whole = decode(&[stream]);
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode(&bytes), whole);
        assert_eq!(data(&whole), ["1", "2\n3", "é"]);
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
pub(crate) mod fuzz {
    use super::tests::decode;
    use proptest::prelude::*;

    /// Splits `bytes` at the given cut points (taken modulo its length).
    pub(crate) fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut points: Vec<usize> =
            cuts.iter().map(|cut| if bytes.is_empty() { 0 } else { cut % bytes.len() }).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut start = 0;
        for point in points {
            chunks.push(&bytes[start..point]);
            start = point;
        }
        chunks.push(&bytes[start..]);
        chunks
    }

    /// Streams built from the format's own pieces, so the interesting cases (CR/LF pairs,
    /// comments, multi-byte text) are common.
    fn stream() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"data: ".to_vec()),
            Just(b"data:".to_vec()),
            Just(b"event: e".to_vec()),
            Just(b"id: 1".to_vec()),
            Just(b"retry: 10".to_vec()),
            Just(b": comment".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\r\n".to_vec()),
            Just("é✓🦀".as_bytes().to_vec()),
            Just(b"\xEF\xBB\xBF".to_vec()),
            "[a-z {}\\[\\]\":,]{0,12}".prop_map(String::into_bytes),
            proptest::collection::vec(any::<u8>(), 0..4),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|pieces| pieces.concat())
    }

    proptest! {
        #[test]
        fn any_chunking_decodes_like_one_chunk(
            bytes in stream(),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let whole = decode(&[&bytes]);
            prop_assert_eq!(decode(&split(&bytes, &cuts)), whole);
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let events = decode(&split(&bytes, &cuts));
            prop_assert_eq!(events, decode(&[&bytes]));
        }
    }
}
