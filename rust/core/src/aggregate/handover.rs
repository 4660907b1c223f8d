//! RULE R13: the long strings of streamed arguments, taken out of a closed
//! result so that the binding can hand them over to its own values.
//!
//! A giant streamed argument is a `String` in the core's tree. Kept there
//! while the binding builds its `str`, it costs its size a second time for
//! as long as the result lives. [`Response::take_long_strings`] moves every
//! such string out (an empty string stays in its place) and says where it
//! was, so that its one owner can turn it into the binding's value and free
//! it, and put it back wherever the tree is read whole (`to_dict()`,
//! `to_json()`).

use serde_json::Value;

use super::{Part, Response};

/// One step of a path into a part's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// A string taken out of a result, and where it was: `candidates[candidate]`
/// (position in [`Response::candidates`]), `parts[part]`, then `path` inside
/// that part's value (it starts `functionCall`, `args`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakenString {
    pub candidate: usize,
    pub part: usize,
    pub path: Vec<Step>,
    pub text: String,
}

impl Response {
    /// Moves out every string of at least `min` bytes inside the `args` of
    /// a built call part (`Part::Value`: a streamed call), in candidate, part
    /// and document order. Ids, names and every other field stay. Nothing
    /// is allocated unless something is found (a walk per streamed call).
    pub fn take_long_strings(&mut self, min: usize) -> Vec<TakenString> {
        let mut taken = Vec::new();
        // One stack and one path for every walk: a streamed call's walk
        // allocates nothing (8,000 calls of one small argument each paid an
        // allocation apiece otherwise).
        let (mut stack, mut path) = (Vec::new(), Vec::new());
        for (c, candidate) in self.candidates.iter_mut().enumerate() {
            for (p, part) in candidate.parts.iter_mut().enumerate() {
                let Part::Value(Value::Object(part)) = part else {
                    continue;
                };
                // A scan of a few keys, not a hashed lookup (measured: 90
                // fewer instructions per call of one small argument).
                let Some(Value::Object(call)) = field(part, "functionCall") else {
                    continue;
                };
                let Some(args) = field(call, "args") else {
                    continue;
                };
                walk(args, min, &mut stack, &mut path, &mut |path, text| {
                    let mut steps =
                        vec![Step::Key("functionCall".into()), Step::Key("args".into())];
                    steps.extend(path.iter().map(|s| match s {
                        At::Key(k) => Step::Key((*k).to_owned()),
                        At::Index(i) => Step::Index(*i),
                    }));
                    taken.push(TakenString {
                        candidate: c,
                        part: p,
                        path: steps,
                        text,
                    });
                });
            }
        }
        taken
    }
}

/// The value of `key` in a small map.
fn field<'a>(map: &'a mut serde_json::Map<String, Value>, key: &str) -> Option<&'a mut Value> {
    map.iter_mut()
        .find(|(k, _)| k.as_str() == key)
        .map(|(_, v)| v)
}

/// A step of the walk, borrowing its key from the tree.
enum At<'a> {
    Key(&'a str),
    Index(usize),
}

/// The values still to visit, each with the path length above it and its step.
type Stack<'a> = Vec<(&'a mut Value, usize, Option<At<'a>>)>;

/// Every long string of `value`, depth first and in document order
/// (iterative: a tree may be as deep as F10 allows). `stack` and `path`
/// come empty and are left empty.
fn walk<'a>(
    value: &'a mut Value,
    min: usize,
    stack: &mut Stack<'a>,
    path: &mut Vec<At<'a>>,
    found: &mut impl FnMut(&[At<'a>], String),
) {
    let mut next = Some((value, 0, None));
    while let Some((value, depth, step)) = next.take().or_else(|| stack.pop()) {
        path.truncate(depth);
        path.extend(step);
        match value {
            Value::String(s) if s.len() >= min => found(path, std::mem::take(s)),
            Value::Array(items) => {
                let depth = path.len();
                for (i, item) in items.iter_mut().enumerate().rev() {
                    stack.push((item, depth, Some(At::Index(i))));
                }
            }
            Value::Object(map) => {
                let depth = path.len();
                for (key, item) in map.iter_mut().rev() {
                    stack.push((item, depth, Some(At::Key(key.as_str()))));
                }
            }
            _ => {}
        }
    }
    path.clear();
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Step, TakenString};
    use crate::aggregate::{CandidateResult, Part, Response};

    fn candidate(parts: Vec<Part>) -> CandidateResult {
        CandidateResult {
            index: 0,
            parts,
            text: String::new(),
            thought_text: String::new(),
            call_parts: vec![],
            unfinished_calls: vec![],
            finish_reason: None,
            finish_message: None,
            metadata: serde_json::Map::new(),
        }
    }

    #[test]
    fn r13_long_argument_strings_are_taken_in_document_order_and_nothing_else() {
        let long = "x".repeat(8);
        let mut response = Response {
            candidates: vec![candidate(vec![
                Part::Text {
                    text: long.clone(),
                    thought: false,
                },
                Part::Value(json!({
                    "functionCall": {"name": long, "id": long, "args": {
                        "a": long, "short": "abc", "list": [1, long, {"b": long}],
                    }},
                    "thoughtSignature": long,
                })),
            ])],
            ..Response::default()
        };
        let taken = response.take_long_strings(8);
        let at = |path: &[Step]| TakenString {
            candidate: 0,
            part: 1,
            path: [
                vec![Step::Key("functionCall".into()), Step::Key("args".into())],
                path.to_vec(),
            ]
            .concat(),
            text: long.clone(),
        };
        assert_eq!(
            taken,
            vec![
                at(&[Step::Key("a".into())]),
                at(&[Step::Key("list".into()), Step::Index(1)]),
                at(&[
                    Step::Key("list".into()),
                    Step::Index(2),
                    Step::Key("b".into())
                ]),
            ]
        );
        assert_eq!(
            response.candidates[0].parts[1],
            Part::Value(json!({
                "functionCall": {"name": long, "id": long, "args": {
                    "a": "", "short": "abc", "list": [1, "", {"b": ""}],
                }},
                "thoughtSignature": long,
            }))
        );
        assert_eq!(
            response.candidates[0].parts[0],
            Part::Text {
                text: long.clone(),
                thought: false
            }
        );
    }
}
