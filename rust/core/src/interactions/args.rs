//! Incremental strict JSON for `arguments_delta` fragments (interactions.md
//! I14-I17): the argument text of one call arrives split anywhere (inside
//! strings and escapes); values are yielded live as `(json_path, value)` and
//! the tree is built as it goes, so no byte is parsed twice.

use serde_json::{Map, Value};

use crate::aggregate::q;
use crate::event::MAX_JSON_DEPTH;
use crate::scan::short_escape;

/// Paths longer than this are not yielded live (I15).
pub const MAX_LIVE_PATH: usize = 1024;

/// One live argument value (I15): a string piece (appended at its path) or
/// a complete scalar.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgPiece {
    pub json_path: String,
    pub value: Value,
}

#[derive(Debug)]
enum Container {
    Obj {
        map: Map<String, Value>,
        key: Option<String>,
        path_len: usize,
    },
    Arr {
        items: Vec<Value>,
        path_len: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    E,
    ESign,
    Exp,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// Before the top-level value.
    Start,
    /// A value is expected (after `:` or `,` in an array).
    Value,
    /// After `[`: a value or `]`.
    ArrFirst,
    /// After `{`: a key or `}`.
    ObjFirst,
    /// After `,` in an object: a key.
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    After,
    /// Inside a string (a key when `key`).
    Str {
        key: bool,
    },
    /// After a backslash.
    Escape {
        key: bool,
    },
    /// In `\uXXXX`: `n` digits read so far of `code`; `high` a pending high surrogate.
    Unicode {
        key: bool,
        n: u8,
        code: u32,
        high: Option<u32>,
    },
    /// After a high surrogate escape: expecting `\` (stage 0) then `u` (stage 1).
    Low {
        key: bool,
        stage: u8,
        high: u32,
    },
    Number(Num),
    Literal {
        which: u8,
        pos: u8,
    },
    /// The top-level object is complete; only whitespace may follow.
    Done,
    Failed,
}

const LITERALS: [&[u8]; 3] = [b"true", b"false", b"null"];

/// The parser of one call's argument text.
#[derive(Debug)]
pub struct ArgParser {
    lex: Lex,
    stack: Vec<Container>,
    /// Path of the innermost open container.
    path: String,
    /// The string (or key) being read.
    cur: String,
    /// Bytes of `cur` already yielded live.
    sent: usize,
    /// The number being read.
    num: String,
    /// The finished top-level value.
    root: Option<Value>,
    /// All argument text, kept for I16 (raw arguments on error).
    pub raw: String,
    /// Characters consumed so far (I16 positions).
    chars: u64,
    pub error: Option<String>,
    /// The I15 long-path warning was given.
    pub long_path_warned: bool,
    /// Live pieces are wanted (the aggregator's `deltas` option).
    live: bool,
}

impl Default for ArgParser {
    fn default() -> Self {
        Self::new()
    }
}

fn is_ident(key: &str) -> bool {
    let mut bytes = key.bytes();
    matches!(bytes.next(), Some(b) if b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

/// Appends the segment of the value being read in `container` (none at the top).
fn push_segment(path: &mut String, container: Option<&Container>) {
    match container {
        Some(Container::Obj { key: Some(k), .. }) => push_key(path, k),
        Some(Container::Arr { items, .. }) => {
            path.push('[');
            path.push_str(&items.len().to_string());
            path.push(']');
        }
        _ => {}
    }
}

fn push_key(path: &mut String, key: &str) {
    if is_ident(key) {
        path.push('.');
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&q(key));
        path.push(']');
    }
}

impl ArgParser {
    #[must_use]
    pub fn new() -> Self {
        Self {
            lex: Lex::Start,
            stack: Vec::new(),
            path: String::from("$"),
            cur: String::new(),
            sent: 0,
            num: String::new(),
            root: None,
            raw: String::new(),
            chars: 0,
            error: None,
            long_path_warned: false,
            live: true,
        }
    }

    /// Feeds one fragment; live values go to `out` (with `live`), and
    /// `long_path` is set when a value was withheld for its path length.
    pub fn feed(&mut self, fragment: &str, live: bool, out: &mut Vec<ArgPiece>) -> bool {
        self.raw.push_str(fragment);
        self.live = live;
        let mut long_path = false;
        if self.lex == Lex::Failed {
            return false;
        }
        let bytes = fragment.as_bytes();
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            if let Lex::Str { .. } = self.lex {
                // A run of plain string bytes: up to a quote, backslash or
                // control byte (all ASCII, so the run is whole characters).
                let run = bytes[i..]
                    .iter()
                    .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                    .unwrap_or(bytes.len() - i);
                if run > 0 {
                    // `i` and `i + run` sit next to ASCII bytes: char boundaries.
                    let text = &fragment[i..i + run];
                    self.cur.push_str(text);
                    self.chars += text.chars().count() as u64;
                    i += run;
                    continue;
                }
            }
            if b >= 0x80 {
                // Outside strings any non-ASCII character is out of place.
                let c = fragment
                    .get(i..)
                    .and_then(|t| t.chars().next())
                    .unwrap_or('?');
                self.fail(&format!("unexpected character {}", q(&c.to_string())));
                return long_path;
            }
            if let Err(reason) = self.byte(b, live, out, &mut long_path) {
                self.fail(&reason);
                return long_path;
            }
            self.chars += 1;
            i += 1;
        }
        // The string piece this fragment completed (I15).
        if live {
            if let Lex::Str { key: false } | Lex::Escape { key: false } = self.lex {
                self.send_piece(false, out, &mut long_path);
            }
            if let Lex::Unicode { key: false, .. } | Lex::Low { key: false, .. } = self.lex {
                self.send_piece(false, out, &mut long_path);
            }
        }
        long_path
    }

    fn fail(&mut self, reason: &str) {
        self.error = Some(format!(
            "arguments are not valid JSON at character {}: {reason}",
            self.chars
        ));
        self.lex = Lex::Failed;
    }

    /// Ends the text (`step.stop`): the arguments, or an error (I16).
    pub fn finish(&mut self) -> Result<Value, String> {
        match self.lex {
            Lex::Done => Ok(self.root.clone().unwrap_or(Value::Null)),
            Lex::Failed => Err(self.error.clone().unwrap_or_default()),
            _ => {
                self.fail("unexpected end");
                Err(self.error.clone().unwrap_or_default())
            }
        }
    }

    /// The arguments so far (I17): open containers and strings closed where
    /// they stand; an incomplete number or literal left out. After an error:
    /// the raw text.
    #[must_use]
    pub fn partial(&self) -> Value {
        if self.lex == Lex::Failed {
            return Value::String(self.raw.clone());
        }
        if let Some(root) = &self.root {
            return root.clone();
        }
        let mut carry: Option<Value> = match self.lex {
            Lex::Str { key: false }
            | Lex::Escape { key: false }
            | Lex::Unicode { key: false, .. }
            | Lex::Low { key: false, .. } => Some(Value::String(self.cur.clone())),
            _ => None,
        };
        for frame in self.stack.iter().rev() {
            let value = match frame {
                Container::Obj { map, key, .. } => {
                    let mut map = map.clone();
                    if let (Some(k), Some(v)) = (key, carry.take()) {
                        map.insert(k.clone(), v);
                    }
                    Value::Object(map)
                }
                Container::Arr { items, .. } => {
                    let mut items = items.clone();
                    if let Some(v) = carry.take() {
                        items.push(v);
                    }
                    Value::Array(items)
                }
            };
            carry = Some(value);
        }
        carry.unwrap_or_else(|| Value::Object(Map::new()))
    }

    fn emit(&mut self, value: Value, out: &mut Vec<ArgPiece>, long_path: &mut bool) {
        if !self.live {
            return;
        }
        // Check the length before building the path, so a long key or a
        // deep path costs nothing per value (I15).
        let extra = match self.stack.last() {
            Some(Container::Obj { key: Some(k), .. }) => k.len() + 1,
            Some(Container::Arr { .. }) => 2,
            _ => return,
        };
        if self.path.len() + extra > MAX_LIVE_PATH {
            *long_path = true;
            return;
        }
        let base = self.path.len();
        push_segment(&mut self.path, self.stack.last());
        if self.path.len() > MAX_LIVE_PATH {
            *long_path = true;
        } else {
            out.push(ArgPiece {
                json_path: self.path.clone(),
                value,
            });
        }
        self.path.truncate(base);
    }

    fn send_piece(&mut self, done: bool, out: &mut Vec<ArgPiece>, long_path: &mut bool) {
        let piece = self.cur.get(self.sent..).unwrap_or("");
        if !piece.is_empty() || (done && self.cur.is_empty()) {
            let value = Value::String(piece.to_owned());
            self.emit(value, out, long_path);
        }
        self.sent = self.cur.len();
    }

    /// Puts a finished value into the innermost container.
    fn put(&mut self, value: Value) {
        match self.stack.last_mut() {
            Some(Container::Obj { map, key, .. }) => {
                if let Some(k) = key.take() {
                    map.insert(k, value);
                }
                self.lex = Lex::After;
            }
            Some(Container::Arr { items, .. }) => {
                items.push(value);
                self.lex = Lex::After;
            }
            None => {
                self.root = Some(value);
                self.lex = Lex::Done;
            }
        }
    }

    fn open(&mut self, obj: bool) -> Result<(), String> {
        if self.stack.len() >= MAX_JSON_DEPTH {
            return Err(format!("nesting deeper than {MAX_JSON_DEPTH}"));
        }
        // The parent's path ends here; the container's own segment follows.
        let path_len = self.path.len();
        push_segment(&mut self.path, self.stack.last());
        self.stack.push(if obj {
            Container::Obj {
                map: Map::new(),
                key: None,
                path_len,
            }
        } else {
            Container::Arr {
                items: Vec::new(),
                path_len,
            }
        });
        self.lex = if obj { Lex::ObjFirst } else { Lex::ArrFirst };
        Ok(())
    }

    fn close_container(&mut self) {
        if let Some(frame) = self.stack.pop() {
            let (value, path_len) = match frame {
                Container::Obj { map, path_len, .. } => (Value::Object(map), path_len),
                Container::Arr { items, path_len } => (Value::Array(items), path_len),
            };
            self.path.truncate(path_len);
            self.put(value);
        }
    }

    fn finish_number(
        &mut self,
        out: &mut Vec<ArgPiece>,
        long_path: &mut bool,
    ) -> Result<(), String> {
        let text = std::mem::take(&mut self.num);
        // `-0` is the integer 0, as Python's JSON parsers read it (serde_json
        // would make it the float -0.0).
        let value: Value = if text == "-0" {
            Value::from(0)
        } else {
            serde_json::from_str(&text).map_err(|_| "number out of range".to_owned())?
        };
        self.emit(value.clone(), out, long_path);
        self.put(value);
        Ok(())
    }

    fn unexpected(b: u8) -> String {
        format!("unexpected character {}", q(&char::from(b).to_string()))
    }

    fn begin_value(&mut self, b: u8) -> Result<(), String> {
        match b {
            b'{' => self.open(true),
            b'[' => self.open(false),
            b'"' => {
                self.cur.clear();
                self.sent = 0;
                self.lex = Lex::Str { key: false };
                Ok(())
            }
            b'-' => {
                self.num.clear();
                self.num.push('-');
                self.lex = Lex::Number(Num::Minus);
                Ok(())
            }
            b'0'..=b'9' => {
                self.num.clear();
                self.num.push(char::from(b));
                self.lex = Lex::Number(if b == b'0' { Num::Zero } else { Num::Int });
                Ok(())
            }
            b't' => {
                self.lex = Lex::Literal { which: 0, pos: 1 };
                Ok(())
            }
            b'f' => {
                self.lex = Lex::Literal { which: 1, pos: 1 };
                Ok(())
            }
            b'n' => {
                self.lex = Lex::Literal { which: 2, pos: 1 };
                Ok(())
            }
            _ => Err(Self::unexpected(b)),
        }
    }

    fn end_string(&mut self, key: bool, live: bool, out: &mut Vec<ArgPiece>, long_path: &mut bool) {
        let s = std::mem::take(&mut self.cur);
        if key {
            if let Some(Container::Obj { key: slot, .. }) = self.stack.last_mut() {
                *slot = Some(s);
            }
            self.lex = Lex::Colon;
        } else if live {
            self.cur = s;
            self.send_piece(true, out, long_path);
            let s = std::mem::take(&mut self.cur);
            self.put(Value::String(s));
        } else {
            self.put(Value::String(s));
        }
        self.sent = 0;
    }

    fn push_code(&mut self, code: u32) -> Result<(), String> {
        let c = char::from_u32(code).ok_or_else(|| "lone surrogate".to_owned())?;
        self.cur.push(c);
        Ok(())
    }

    // One match over the lexer's states, each arm a few lines: split, the arms would need
    // the whole lexer state passed around.
    #[allow(clippy::too_many_lines)]
    fn byte(
        &mut self,
        b: u8,
        live: bool,
        out: &mut Vec<ArgPiece>,
        long_path: &mut bool,
    ) -> Result<(), String> {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.lex {
            Lex::Start => {
                if ws {
                    Ok(())
                } else if b == b'{' {
                    self.open(true)
                } else {
                    Err("arguments are not a JSON object".into())
                }
            }
            Lex::Value => {
                if ws {
                    Ok(())
                } else {
                    self.begin_value(b)
                }
            }
            Lex::ArrFirst => {
                if ws {
                    Ok(())
                } else if b == b']' {
                    self.close_container();
                    Ok(())
                } else {
                    self.begin_value(b)
                }
            }
            Lex::ObjFirst | Lex::Key => {
                if ws {
                    Ok(())
                } else if b == b'}' && self.lex == Lex::ObjFirst {
                    self.close_container();
                    Ok(())
                } else if b == b'"' {
                    self.cur.clear();
                    self.lex = Lex::Str { key: true };
                    Ok(())
                } else {
                    Err(Self::unexpected(b))
                }
            }
            Lex::Colon => {
                if ws {
                    Ok(())
                } else if b == b':' {
                    self.lex = Lex::Value;
                    Ok(())
                } else {
                    Err(Self::unexpected(b))
                }
            }
            Lex::After => {
                if ws {
                    return Ok(());
                }
                match (b, self.stack.last()) {
                    (b',', Some(Container::Obj { .. })) => {
                        self.lex = Lex::Key;
                        Ok(())
                    }
                    (b',', Some(Container::Arr { .. })) => {
                        self.lex = Lex::Value;
                        Ok(())
                    }
                    (b'}', Some(Container::Obj { .. })) | (b']', Some(Container::Arr { .. })) => {
                        self.close_container();
                        Ok(())
                    }
                    _ => Err(Self::unexpected(b)),
                }
            }
            Lex::Str { key } => match b {
                b'"' => {
                    self.end_string(key, live, out, long_path);
                    Ok(())
                }
                b'\\' => {
                    self.lex = Lex::Escape { key };
                    Ok(())
                }
                0..=0x1F => Err(Self::unexpected(b)),
                // Runs of plain string bytes are taken whole by `feed`.
                _ => Err(Self::unexpected(b)),
            },
            Lex::Escape { key } => {
                if b == b'u' {
                    self.lex = Lex::Unicode {
                        key,
                        n: 0,
                        code: 0,
                        high: None,
                    };
                    return Ok(());
                }
                let c = short_escape(b).ok_or_else(|| "invalid escape".to_owned())?;
                self.cur.push(c);
                self.lex = Lex::Str { key };
                Ok(())
            }
            Lex::Unicode { key, n, code, high } => {
                let digit = char::from(b)
                    .to_digit(16)
                    .ok_or_else(|| "invalid escape".to_owned())?;
                let code = code * 16 + digit;
                if n < 3 {
                    self.lex = Lex::Unicode {
                        key,
                        n: n + 1,
                        code,
                        high,
                    };
                    return Ok(());
                }
                match (high, code) {
                    (None, 0xD800..=0xDBFF) => {
                        self.lex = Lex::Low {
                            key,
                            stage: 0,
                            high: code,
                        };
                        Ok(())
                    }
                    (None, 0xDC00..=0xDFFF) => Err("lone surrogate".into()),
                    (None, _) => {
                        self.push_code(code)?;
                        self.lex = Lex::Str { key };
                        Ok(())
                    }
                    (Some(h), 0xDC00..=0xDFFF) => {
                        self.push_code(0x10000 + ((h - 0xD800) << 10) + (code - 0xDC00))?;
                        self.lex = Lex::Str { key };
                        Ok(())
                    }
                    (Some(_), _) => Err("lone surrogate".into()),
                }
            }
            Lex::Low { key, stage, high } => match (stage, b) {
                (0, b'\\') => {
                    self.lex = Lex::Low {
                        key,
                        stage: 1,
                        high,
                    };
                    Ok(())
                }
                (1, b'u') => {
                    self.lex = Lex::Unicode {
                        key,
                        n: 0,
                        code: 0,
                        high: Some(high),
                    };
                    Ok(())
                }
                _ => Err("lone surrogate".into()),
            },
            Lex::Number(state) => {
                let next = match (state, b) {
                    (Num::Minus, b'0') => Some(Num::Zero),
                    (Num::Minus, b'1'..=b'9') => Some(Num::Int),
                    (Num::Int, b'0'..=b'9') => Some(Num::Int),
                    (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
                    (Num::Dot | Num::Frac, b'0'..=b'9') => Some(Num::Frac),
                    (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::E),
                    (Num::E, b'+' | b'-') => Some(Num::ESign),
                    (Num::E | Num::ESign | Num::Exp, b'0'..=b'9') => Some(Num::Exp),
                    _ => None,
                };
                if let Some(next) = next {
                    self.num.push(char::from(b));
                    self.lex = Lex::Number(next);
                    return Ok(());
                }
                if matches!(state, Num::Zero | Num::Int | Num::Frac | Num::Exp) {
                    self.finish_number(out, long_path)?;
                    // The delimiter belongs to what follows the number.
                    self.byte(b, live, out, long_path)
                } else {
                    Err(Self::unexpected(b))
                }
            }
            Lex::Literal { which, pos } => {
                let word = LITERALS.get(usize::from(which)).copied().unwrap_or(b"");
                if word.get(usize::from(pos)) != Some(&b) {
                    return Err(Self::unexpected(b));
                }
                if usize::from(pos) + 1 == word.len() {
                    let value = match which {
                        0 => Value::Bool(true),
                        1 => Value::Bool(false),
                        _ => Value::Null,
                    };
                    self.emit(value.clone(), out, long_path);
                    self.put(value);
                } else {
                    self.lex = Lex::Literal {
                        which,
                        pos: pos + 1,
                    };
                }
                Ok(())
            }
            Lex::Done => {
                if ws {
                    Ok(())
                } else {
                    Err(Self::unexpected(b))
                }
            }
            Lex::Failed => Ok(()),
        }
    }
}
