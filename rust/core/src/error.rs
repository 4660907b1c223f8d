//! Errors for bad payloads (aggregation.md F8, F10); their texts are the
//! catalog's (X4).

use std::fmt;

use crate::diagnostics::Diagnostic;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidJson,
    InvalidUtf8,
    EventTooLarge,
    /// U4: the body is compressed; nothing of it can be read.
    CompressedBody,
    /// U5: the body's lines were fed without their line ends.
    LinesWithoutEnds,
}

impl ErrorKind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid-json",
            Self::InvalidUtf8 => "invalid-utf8",
            Self::EventTooLarge => "event-too-large",
            Self::CompressedBody => "compressed-body",
            Self::LinesWithoutEnds => "lines-without-ends",
        }
    }
}

/// One bad payload: skipped, reported with where it was and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedStream {
    pub kind: ErrorKind,
    pub offset: u64,
    pub event_index: u64,
    /// X4: the F8 (or I4) diagnostic; with `strict=False` it is the warning.
    pub diagnostic: Diagnostic,
}

impl MalformedStream {
    /// X4: the diagnostic's message.
    #[must_use]
    pub fn message(&self) -> String {
        self.diagnostic.message()
    }

    #[must_use]
    pub fn invalid_json(offset: u64, event: u64) -> Self {
        let diagnostic = Diagnostic::InvalidJson { event, offset };
        Self::new(ErrorKind::InvalidJson, offset, event, diagnostic)
    }

    #[must_use]
    pub fn not_an_object(offset: u64, event: u64) -> Self {
        let diagnostic = Diagnostic::NotAnObject { event, offset };
        Self::new(ErrorKind::InvalidJson, offset, event, diagnostic)
    }

    #[must_use]
    pub fn invalid_utf8(offset: u64, event: u64) -> Self {
        let diagnostic = Diagnostic::InvalidUtf8 { event, offset };
        Self::new(ErrorKind::InvalidUtf8, offset, event, diagnostic)
    }

    #[must_use]
    pub fn too_large(offset: u64, event: u64, max: usize) -> Self {
        let limit = max as u64;
        let diagnostic = Diagnostic::EventTooLarge {
            event,
            offset,
            limit,
        };
        Self::new(ErrorKind::EventTooLarge, offset, event, diagnostic)
    }

    /// U4, U5: the body as fed cannot be read at all (not one bad payload);
    /// `event` is the number of events seen before.
    #[must_use]
    pub fn unreadable(diagnostic: Diagnostic, event: u64) -> Self {
        let (kind, offset) = match diagnostic {
            Diagnostic::LinesWithoutEnds { offset } => (ErrorKind::LinesWithoutEnds, offset),
            _ => (ErrorKind::CompressedBody, 0),
        };
        Self::new(kind, offset, event, diagnostic)
    }

    #[must_use]
    pub fn new(kind: ErrorKind, offset: u64, event_index: u64, diagnostic: Diagnostic) -> Self {
        Self {
            kind,
            offset,
            event_index,
            diagnostic,
        }
    }
}

impl fmt::Display for MalformedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for MalformedStream {}
