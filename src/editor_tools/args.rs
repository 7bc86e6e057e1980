//! A tool's arguments, read with messages that name the argument.

use serde_json::{Map, Value};

use super::error::ArgError;

/// String argument `name`; `None` when absent or null.
pub fn string<'a>(args: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, ArgError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ArgError::NotAString { name: name.to_owned(), got: kind(other) }),
    }
}

/// String argument `name`, which must be given and not empty.
pub fn required_string<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ArgError> {
    match string(args, name)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(ArgError::Required { name: name.to_owned() }),
    }
}

/// A 1-based line or column `name`; `None` when absent or null.
pub fn position(args: &Map<String, Value>, name: &str) -> Result<Option<u32>, ArgError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=u32::MAX as u64).contains(&n) => Ok(Some(n as u32)),
            _ => Err(ArgError::NotAPosition { name: name.to_owned(), got: shown(v) }),
        },
    }
}

pub fn boolean(args: &Map<String, Value>, name: &str) -> Result<Option<bool>, ArgError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(ArgError::NotABoolean { name: name.to_owned(), got: kind(other) }),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A value in a message: short, one line.
fn shown(v: &Value) -> String {
    let text = v.to_string();
    if text.len() > 40 {
        format!("{}…", crate::core::text::cut(&text, 40))
    } else {
        text
    }
}
