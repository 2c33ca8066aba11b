//! HTTP/2 frames written by hand, for the floods a well-behaved client library never sends:
//! streams opened and reset at once, pings never read, header blocks continued forever,
//! settings over and over (RFC 9113, section 6).

/// The connection preface and an empty SETTINGS frame.
pub fn preface() -> Vec<u8> {
    let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    bytes.extend(frame(4, 0, 0, &[]));
    bytes
}

/// A frame of `kind` with `flags` on `stream`.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut bytes = vec![length[1], length[2], length[3], kind, flags];
    bytes.extend((stream & 0x7fff_ffff).to_be_bytes());
    bytes.extend(payload);
    bytes
}

/// A POST to `/` in HPACK's static table (`:method POST`, `:scheme https`, `:path /`).
const POST_ROOT: [u8; 3] = [0x83, 0x87, 0x84];
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

/// A request's headers on `stream`, its end of stream and of headers set as asked.
pub fn headers(stream: u32, end_headers: bool) -> Vec<u8> {
    let flags = if end_headers { END_HEADERS } else { 0 };
    frame(1, flags | END_STREAM, stream, &POST_ROOT)
}

/// RST_STREAM CANCEL on `stream`.
pub fn reset(stream: u32) -> Vec<u8> {
    frame(3, 0, stream, &8u32.to_be_bytes())
}

/// A PING.
pub fn ping(data: u64) -> Vec<u8> {
    frame(6, 0, 0, &data.to_be_bytes())
}

/// SETTINGS with one setting (SETTINGS_MAX_CONCURRENT_STREAMS).
pub fn settings(value: u32) -> Vec<u8> {
    let mut payload = 3u16.to_be_bytes().to_vec();
    payload.extend(value.to_be_bytes());
    frame(4, 0, 0, &payload)
}

/// A CONTINUATION of `stream`'s header block: `x: y` literals, never ending it.
pub fn continuation(stream: u32) -> Vec<u8> {
    let literal = [0x00, 0x01, b'x', 0x01, b'y'];
    frame(9, 0, stream, &literal.repeat(200))
}
