//! The wire between the controller and its evaluator process: one pipe each way, carrying
//! frames. A frame is its length and its header's (two little-endian `u32`s), the header — a
//! [`Request`] or a [`Reply`] as JSON — and a payload of raw bytes: the JSON text of what is
//! bound, handed over as the API server sent it, so that the child reads it straight into CEL's
//! values and nothing is encoded twice. serde_json for the headers, as everywhere else here:
//! they are a few dozen bytes, and a binary format would be one more crate for nothing.
//!
//! The parent writes requests without waiting where no answer is needed (definitions, releases)
//! and reads the replies to binds and evaluations in the order it asked for them. A frame is
//! bounded on reading ([`MAX_REPLY`] from the child, [`MAX_REQUEST`] from the parent), so a
//! process gone wrong cannot make the other allocate without limit.

use std::io::{self, Read, Write};

use jiff::Timestamp;
use kube_retention_common::cel::Expect;
use serde::{Deserialize, Serialize};

/// The most a reply frame may hold: replies are small, and their texts are cut to
/// [`MAX_REASON`].
pub const MAX_REPLY: usize = 64 * 1024;

/// The most a request frame may hold: the largest bind, a Cleaner's targets together.
pub const MAX_REQUEST: usize = 1 << 30;

/// The most of an error's text a reply carries.
pub const MAX_REASON: usize = 2 * 1024;

/// What the parent asks. Only [`Request::Bind`] and [`Request::Evaluate`] are answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Request {
    /// Compile `source` (over `declared`, producing `expect`) as expression `id`. Not answered:
    /// an evaluation of an expression that did not compile answers why.
    Define {
        id: u64,
        source: String,
        expect: Expect,
        declared: Vec<String>,
    },
    /// Expression `id` is no longer needed.
    Forget { id: u64 },
    /// Bind the payload as `handle`: the JSON texts of the named variables, one after another,
    /// each as long as `names` says.
    Bind {
        handle: u64,
        names: Vec<(String, usize)>,
    },
    /// `handle` is no longer needed.
    Release { handle: u64 },
    /// Evaluate expression `id` on `handle`, with `time` bound by name where given.
    Evaluate {
        handle: u64,
        id: u64,
        time: Option<(String, Timestamp)>,
    },
}

/// What the child answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Reply {
    /// The first frame: the process holds itself to its bounds and reads requests now.
    Ready {
        /// Its address space's bound, in bytes, as it set it.
        memory: u64,
    },
    /// `handle` is bound, or could not be (`error`).
    Bound {
        handle: u64,
        error: Option<String>,
        /// The CPU time the bind took, in nanoseconds.
        cpu_nanos: u64,
    },
    /// Expression `id` evaluated on `handle`.
    Evaluated {
        handle: u64,
        id: u64,
        outcome: Outcome,
        /// The cost units the meter counted.
        spent: u64,
        cpu_nanos: u64,
    },
}

/// What an evaluation gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    Condition(bool),
    Time(Timestamp),
    /// It failed: `reason`, and the meter's limit where it went past one.
    Failed {
        reason: String,
        exceeded: Option<MeterLimit>,
    },
}

/// A limit of the meter inside the child (the process's own bounds end it, and are the
/// parent's to tell).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum MeterLimit {
    Cost(u64),
    /// In nanoseconds.
    Time(u64),
}

/// Writes one frame: `header` and `payload`.
pub fn write_frame(
    output: &mut impl Write,
    header: &impl Serialize,
    payload: &[u8],
) -> io::Result<()> {
    let header = serde_json::to_vec(header).map_err(io::Error::other)?;
    let length = |bytes: usize| {
        u32::try_from(bytes).map_err(|_| io::Error::other("a frame of 4 GiB or more"))
    };
    let total = length(header.len() + payload.len())?;
    output.write_all(&total.to_le_bytes())?;
    output.write_all(&length(header.len())?.to_le_bytes())?;
    output.write_all(&header)?;
    output.write_all(payload)
}

/// A frame read: its header, decoded, and its payload.
pub struct Frame<H> {
    pub header: H,
    pub payload: Vec<u8>,
}

/// Reads one frame of at most `max` bytes; `None` at the end of the stream before a frame.
pub fn read_frame<H: for<'de> Deserialize<'de>>(
    input: &mut impl Read,
    max: usize,
) -> io::Result<Option<Frame<H>>> {
    let mut lengths = [0u8; 8];
    match input.read_exact(&mut lengths[..4]) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(error) => return Err(error),
    }
    input.read_exact(&mut lengths[4..])?;
    let (total, header) = frame_lengths(lengths, max)?;
    let mut bytes = vec![0u8; total];
    input.read_exact(&mut bytes)?;
    decode(bytes, header).map(Some)
}

/// The frame's length and its header's, from its first eight bytes, checked against `max`.
pub fn frame_lengths(lengths: [u8; 8], max: usize) -> io::Result<(usize, usize)> {
    let [a, b, c, d, e, f, g, h] = lengths;
    let total = u32::from_le_bytes([a, b, c, d]) as usize;
    let header = u32::from_le_bytes([e, f, g, h]) as usize;
    if total > max || header > total {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a frame of {total} bytes (header {header}), beyond the {max} allowed"),
        ));
    }
    Ok((total, header))
}

/// The header and payload of a frame's `bytes`, the header `header` bytes long.
pub fn decode<H: for<'de> Deserialize<'de>>(
    mut bytes: Vec<u8>,
    header: usize,
) -> io::Result<Frame<H>> {
    let decoded = serde_json::from_slice(&bytes[..header])
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidData, error))?;
    bytes.drain(..header);
    Ok(Frame {
        header: decoded,
        payload: bytes,
    })
}

/// `text` cut to at most [`MAX_REASON`] bytes, on a character boundary.
pub fn cut(mut text: String) -> String {
    if text.len() > MAX_REASON {
        let mut end = MAX_REASON;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_with_their_payload() {
        let request = Request::Bind {
            handle: 7,
            names: vec![("object".into(), 3)],
        };
        let mut wire = Vec::new();
        write_frame(&mut wire, &request, b"{}\n").unwrap();
        let frame: Frame<Request> = read_frame(&mut wire.as_slice(), MAX_REQUEST)
            .unwrap()
            .unwrap();
        assert_eq!(frame.header, request);
        assert_eq!(frame.payload, b"{}\n");
        let none: Option<Frame<Request>> = read_frame(&mut [].as_slice(), MAX_REQUEST).unwrap();
        assert!(none.is_none());
    }

    #[test]
    fn a_frame_past_the_bound_is_refused_before_it_is_read() {
        let mut wire = Vec::new();
        write_frame(&mut wire, &Request::Forget { id: 1 }, &[0; 100]).unwrap();
        let error = read_frame::<Request>(&mut wire.as_slice(), 64)
            .err()
            .expect("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(
            error.to_string().contains("beyond the 64 allowed"),
            "{error}"
        );
    }

    #[test]
    fn reasons_are_cut_on_a_character_boundary() {
        let cut = cut("é".repeat(MAX_REASON));
        assert!(cut.len() <= MAX_REASON + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
