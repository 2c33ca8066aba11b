//! A review's body received into the memory budget ([`crate::memory`]): each chunk charged
//! before it is kept, the whole within the admission's deadline and `--max-body-bytes`, cut off
//! when the budget needs its room for a body that arrives faster. Nothing else is held while
//! it arrives: the review takes its place among those answered ([`crate::limits`]) only once
//! it is whole.

use std::sync::Arc;

use axum::body::Body;
use futures::StreamExt;

use crate::memory::{Held, Memory, Refused};
use crate::review::lean::Exceeded;

/// Why a body was not received whole.
#[derive(Debug, thiserror::Error)]
pub enum Unreceived {
    #[error("its body is larger than {limit} bytes (--max-body-bytes)")]
    TooLarge { limit: usize },
    #[error("its body did not arrive within {limit} (--admission-timeout)")]
    TimedOut { limit: String },
    #[error("its body was {0}")]
    CutOff(Refused),
    #[error("kube-retention's webhook is busy: {0}")]
    Full(Exceeded),
    #[error("its body could not be read: {0}")]
    Failed(String),
}

impl From<Refused> for Unreceived {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::CutOff => Self::CutOff(refused),
            Refused::Full(exceeded) => Self::Full(exceeded),
        }
    }
}

/// What a body may be: at most `max` bytes, arriving by `deadline`.
pub struct Bounds {
    pub max: usize,
    pub deadline: tokio::time::Instant,
    /// How `--admission-timeout` reads, for the error.
    pub timeout: String,
}

/// Receives `body`, declared `declared` bytes long (its Content-Length) if it says, into
/// `memory`: the bytes, held until the [`Held`] is dropped.
pub async fn receive(
    body: Body,
    declared: Option<usize>,
    bounds: &Bounds,
    memory: &Arc<Memory>,
) -> Result<(Vec<u8>, Held), Unreceived> {
    let too_large = Unreceived::TooLarge { limit: bounds.max };
    let expected = match declared {
        Some(declared) if declared > bounds.max => return Err(too_large),
        Some(declared) => declared,
        None => bounds.max,
    };
    let mut incoming = memory.arriving();
    let mut chunks = body.into_data_stream();
    let mut received = 0usize;
    loop {
        let chunk = tokio::select! {
            chunk = chunks.next() => chunk,
            () = incoming.cut_off() => return Err(Unreceived::CutOff(Refused::CutOff)),
            () = tokio::time::sleep_until(bounds.deadline) => {
                return Err(Unreceived::TimedOut { limit: bounds.timeout.clone() });
            }
        };
        let chunk = match chunk {
            None => break,
            Some(Ok(chunk)) => chunk,
            Some(Err(error)) => return Err(Unreceived::Failed(error.to_string())),
        };
        received += chunk.len();
        if received > bounds.max {
            return Err(too_large);
        }
        incoming.append(&chunk, expected)?;
    }
    Ok(incoming.finish()?)
}
