//! Errors for bad payloads (aggregation.md F8, F10) and the shared message texts.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidJson,
    InvalidUtf8,
    EventTooLarge,
}

impl ErrorKind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid-json",
            Self::InvalidUtf8 => "invalid-utf8",
            Self::EventTooLarge => "event-too-large",
        }
    }
}

/// One bad payload: skipped, reported with where it was and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedStream {
    pub kind: ErrorKind,
    pub offset: u64,
    pub event_index: u64,
    pub message: String,
}

impl MalformedStream {
    #[must_use]
    pub fn invalid_json(offset: u64, event_index: u64) -> Self {
        Self {
            kind: ErrorKind::InvalidJson,
            offset,
            event_index,
            message: format!(
                "event {event_index} at byte {offset} is not valid JSON; it was skipped \
                 (is this the body of a streamGenerateContent response?)"
            ),
        }
    }

    #[must_use]
    pub fn not_an_object(offset: u64, event_index: u64) -> Self {
        Self {
            kind: ErrorKind::InvalidJson,
            offset,
            event_index,
            message: format!(
                "event {event_index} at byte {offset} is JSON but not an object; it was skipped"
            ),
        }
    }

    #[must_use]
    pub fn invalid_utf8(offset: u64, event_index: u64) -> Self {
        Self {
            kind: ErrorKind::InvalidUtf8,
            offset,
            event_index,
            message: format!(
                "event {event_index} at byte {offset} is not valid UTF-8; it was skipped"
            ),
        }
    }

    #[must_use]
    pub fn too_large(offset: u64, event_index: u64, max: usize) -> Self {
        Self {
            kind: ErrorKind::EventTooLarge,
            offset,
            event_index,
            message: format!(
                "event {event_index} at byte {offset} is larger than max_event_bytes ({max}); \
                 it was skipped (raise max_event_bytes if such events are expected)"
            ),
        }
    }
}

impl fmt::Display for MalformedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MalformedStream {}
