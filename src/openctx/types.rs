//! Serde types of the OpenCtx protocol (version 0.1).
//!
//! Providers are written by third parties and the reference client
//! (`@openctx/client`) validates nothing, so these types are lenient: unknown
//! fields are accepted, `null` reads as absent, and the objects a client hands
//! back to a provider or shows to the user (items, annotations, mentions) keep
//! their unknown fields in `extra` so that nothing is lost on the way through.
//! `None` fields are omitted when serializing, as `undefined` is in JSON.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A position in a document: 0-based line and 0-based `character`, which
/// counts UTF-16 code units (JS string indices), not bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Position {
    pub line: u32,
    pub character: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Range {
    pub start: Position,
    pub end: Position,
}

/// Content shown in a tooltip; `markdown` is preferred where it can be rendered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Hover {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markdown: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The part of an item meant for humans.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UserInterface {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hover: Option<Hover>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The part of an item meant for the model: `content` is what goes to the AI.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AssistantInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A piece of context: shown as an annotation, picked from a mention, or sent to the model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Item {
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<UserInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ai: Option<AssistantInfo>,
    /// Fields this protocol version does not name, kept as they came.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An item attached to a document, or to a range of it (`range: None` = the whole document).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Annotation {
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range: Option<Range>,
    pub item: Item,
    /// From `@openctx/schema` (not on the protocol page), e.g. `"prefer-link-over-detail"`:
    /// open `item.url` instead of showing the detail.
    #[serde(default, rename = "presentationHints", skip_serializing_if = "Option::is_none")]
    pub presentation_hints: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// An @-mentionable resource. It goes back to its provider unchanged in
/// `items({mention})`, so `data` and unknown fields must survive the round trip.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Mention {
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub uri: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Where a provider's annotations apply; see `selectors/` for the matching rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AnnotationSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, rename = "contentContains", skip_serializing_if = "Option::is_none")]
    pub content_contains: Option<String>,
}

/// A (JavaScript) regular expression tested against a chat message.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct MessageSelector {
    pub pattern: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AnnotationsMeta {
    /// `None` (absent): every document; `Some([])`: none. An explicit
    /// `null` also matches nothing: the reference client throws on it.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "null_matches_nothing")]
    pub selectors: Option<Vec<AnnotationSelector>>,
}

/// Only called when `selectors` is present (absent is `default`): `null`
/// becomes `Some([])`.
fn null_matches_nothing<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<AnnotationSelector>>, D::Error> {
    let value: Option<Vec<AnnotationSelector>> = Option::deserialize(d)?;
    Ok(Some(value.unwrap_or_default()))
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MentionsMeta {
    /// Placeholder of the mention picker, e.g. `Search issues...`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// EXPERIMENTAL. The protocol page types it as a string, `@openctx/protocol`
    /// as a boolean: kept as raw JSON, read with [`MentionsMeta::auto_include`].
    #[serde(default, rename = "autoInclude", skip_serializing_if = "Option::is_none")]
    pub auto_include: Option<Value>,
}

impl MentionsMeta {
    /// `autoInclude` read the way JS hosts read it: by truthiness.
    pub fn auto_include(&self) -> bool {
        self.auto_include.as_ref().is_some_and(js_truthy)
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ItemsMeta {
    #[serde(default, rename = "messageSelectors", skip_serializing_if = "Option::is_none")]
    pub message_selectors: Option<Vec<MessageSelector>>,
}

/// The answer to `meta`. A missing feature object means the provider does not
/// offer that feature (no `annotations` → it is never asked for annotations).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MetaResult {
    /// Required by the protocol, but the reference client works without it.
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<AnnotationsMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mentions: Option<MentionsMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<ItemsMeta>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Params of `annotations`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AnnotationsParams {
    pub uri: String,
    pub content: String,
}

/// Params of `mentions`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MentionsParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codebase: Option<String>,
    #[serde(default, rename = "autoInclude", skip_serializing_if = "Option::is_none")]
    pub auto_include: Option<bool>,
}

/// Params of `items`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ItemsParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mention: Option<Mention>,
}

/// JS truthiness of a JSON value (`false`, `0`, `""`, `null` are falsy).
fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// A provider's result that does not decode; `what` names what was expected
/// (e.g. "meta result"), the message says where the JSON went wrong.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("invalid {what}: {error}")]
    Invalid { what: String, error: serde_json::Error },
    #[error("invalid {what}: expected a list, got {got}")]
    NotAList { what: String, got: &'static str },
}

/// Decodes one result with an error that names what was expected (`what`,
/// e.g. "meta result") and where the JSON went wrong.
pub fn parse<T: DeserializeOwned>(value: Value, what: &str) -> Result<T, DecodeError> {
    serde_json::from_value(value).map_err(|error| DecodeError::Invalid { what: what.to_owned(), error })
}

/// Decodes a list result leniently, as the reference client consumes it:
/// `null` is an empty list (`result || []`), and one malformed element is
/// dropped (its error returned) instead of discarding the provider's whole answer.
/// Anything but an array or `null` is an error.
pub fn parse_list_lenient<T: DeserializeOwned>(value: Value, what: &str) -> Result<(Vec<T>, Vec<String>), DecodeError> {
    let elements = match value {
        Value::Null => return Ok((Vec::new(), Vec::new())),
        Value::Array(a) => a,
        other => return Err(DecodeError::NotAList { what: what.to_owned(), got: json_kind(&other) }),
    };
    let mut list = Vec::with_capacity(elements.len());
    let mut errors = Vec::new();
    for (i, element) in elements.into_iter().enumerate() {
        match serde_json::from_value(element) {
            Ok(v) => list.push(v),
            Err(e) => errors.push(format!("invalid {what}[{i}]: {e}")),
        }
    }
    Ok((list, errors))
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_a_realistic_annotation_and_keeps_unknown_fields() {
        let v = json!({
            "uri": "file:///home/alice/src/main.go",
            "range": {"start": {"line": 3, "character": 5}, "end": {"line": 3, "character": 12}},
            "item": {
                "title": "📘 Docs: http.Handler",
                "url": "https://pkg.go.dev/net/http#Handler",
                "ui": {"hover": {"markdown": "**Handler** responds", "text": "Handler responds"}},
                "ai": {"content": "A Handler responds to an HTTP request."},
                "image": {"url": "https://x/y.png", "width": 10}
            },
            "presentationHints": ["prefer-link-over-detail"],
            "providerUri": "https://example.com/p"
        });
        let a: Annotation = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(a.uri, "file:///home/alice/src/main.go");
        let r = a.range.unwrap();
        assert_eq!((r.start.line, r.start.character, r.end.character), (3, 5, 12));
        assert_eq!(a.item.title, "📘 Docs: http.Handler");
        assert_eq!(a.item.url.as_deref(), Some("https://pkg.go.dev/net/http#Handler"));
        let hover = a.item.ui.as_ref().unwrap().hover.as_ref().unwrap();
        assert_eq!(hover.markdown.as_deref(), Some("**Handler** responds"));
        assert_eq!(hover.text.as_deref(), Some("Handler responds"));
        assert_eq!(a.item.ai.as_ref().unwrap().content.as_deref(), Some("A Handler responds to an HTTP request."));
        assert_eq!(a.presentation_hints.as_deref(), Some(&["prefer-link-over-detail".to_string()][..]));
        assert_eq!(a.item.extra["image"]["width"], 10);
        assert_eq!(a.extra["providerUri"], "https://example.com/p");
        // Round trip: nothing lost, nothing added.
        assert_eq!(serde_json::to_value(&a).unwrap(), v);
    }

    #[test]
    fn minimal_objects_serialize_without_absent_fields() {
        let a = Annotation {
            uri: "file:///a.ts".into(),
            item: Item { title: "t".into(), ..Default::default() },
            ..Default::default()
        };
        assert_eq!(serde_json::to_string(&a).unwrap(), r#"{"uri":"file:///a.ts","item":{"title":"t"}}"#);
        let m = MetaResult { name: "p".into(), ..Default::default() };
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"name":"p"}"#);
        let s = AnnotationSelector { content_contains: Some("x".into()), ..Default::default() };
        assert_eq!(serde_json::to_string(&s).unwrap(), r#"{"contentContains":"x"}"#);
        let p = ItemsParams { message: Some("hi".into()), mention: None };
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"message":"hi"}"#);
    }

    #[test]
    fn nulls_read_as_absent() {
        let v =
            json!({"uri": "u", "range": null, "item": {"title": "t", "url": null, "ui": {"hover": null}, "ai": null}});
        let a: Annotation = serde_json::from_value(v).unwrap();
        assert!(a.range.is_none());
        assert!(a.item.url.is_none() && a.item.ai.is_none());
        assert!(a.item.ui.unwrap().hover.is_none());
    }

    #[test]
    fn parses_meta_with_camel_case_fields() {
        let v = json!({
            "name": "🔗 Links",
            "annotations": {"selectors": [{"path": "**/*.go"}, {"contentContains": "TODO", "path": "src/**"}, {}]},
            "mentions": {"label": "Search issues...", "autoInclude": true},
            "items": {"messageSelectors": [{"pattern": "issue-\\d+"}]},
            "features": {"future": 1}
        });
        let m: MetaResult = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(m.name, "🔗 Links");
        let sel = m.annotations.as_ref().unwrap().selectors.as_ref().unwrap();
        assert_eq!(sel.len(), 3);
        assert_eq!(sel[0].path.as_deref(), Some("**/*.go"));
        assert_eq!(sel[1].content_contains.as_deref(), Some("TODO"));
        assert_eq!(sel[2], AnnotationSelector::default());
        let mentions = m.mentions.as_ref().unwrap();
        assert_eq!(mentions.label.as_deref(), Some("Search issues..."));
        assert!(mentions.auto_include());
        assert_eq!(m.items.as_ref().unwrap().message_selectors.as_ref().unwrap()[0].pattern, "issue-\\d+");
        assert_eq!(m.extra["features"]["future"], 1);
        assert_eq!(serde_json::to_value(&m).unwrap(), v);
    }

    #[test]
    fn meta_without_features_and_empty_feature_objects() {
        let m: MetaResult = serde_json::from_value(json!({"name": "x"})).unwrap();
        assert!(m.annotations.is_none() && m.mentions.is_none() && m.items.is_none());
        let m: MetaResult = serde_json::from_value(json!({"name": "x", "annotations": {}, "mentions": {}})).unwrap();
        assert!(m.annotations.unwrap().selectors.is_none());
        assert!(!m.mentions.unwrap().auto_include());
    }

    #[test]
    fn auto_include_accepts_the_string_and_boolean_forms() {
        let read = |v: Value| serde_json::from_value::<MentionsMeta>(json!({"autoInclude": v})).unwrap().auto_include();
        assert!(read(json!(true)));
        assert!(read(json!("true")));
        assert!(read(json!("yes")));
        assert!(!read(json!(false)));
        assert!(!read(json!("")));
        assert!(!read(json!(0)));
        assert!(!read(Value::Null));
    }

    #[test]
    fn mention_data_survives_a_round_trip() {
        let v = json!({
            "title": "Issue #42",
            "description": "Crash on start",
            "uri": "https://tracker/42",
            "data": {"id": 42, "nested": {"labels": ["bug", null]}, "flag": false},
            "providerUri": "https://p"
        });
        let m: Mention = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(m.data.as_ref().unwrap()["nested"]["labels"][0], "bug");
        assert_eq!(serde_json::to_value(&m).unwrap(), v);
        // And inside items params, as it goes back to the provider.
        let p = ItemsParams { message: None, mention: Some(m) };
        assert_eq!(serde_json::to_value(&p).unwrap(), json!({"mention": v}));
    }

    #[test]
    fn params_use_the_wire_names() {
        let p = MentionsParams { query: Some("q".into()), auto_include: Some(false), ..Default::default() };
        assert_eq!(serde_json::to_value(&p).unwrap(), json!({"query": "q", "autoInclude": false}));
        let a = AnnotationsParams { uri: "file:///a".into(), content: "x".into() };
        assert_eq!(serde_json::to_value(&a).unwrap(), json!({"uri": "file:///a", "content": "x"}));
    }

    #[test]
    fn null_selectors_match_nothing_but_absent_ones_match_all() {
        let m: MetaResult = parse(json!({"name": "n", "annotations": {"selectors": null}}), "meta").unwrap();
        assert_eq!(m.annotations.unwrap().selectors, Some(vec![]));
        let m: MetaResult = parse(json!({"name": "n", "annotations": {}}), "meta").unwrap();
        assert_eq!(m.annotations.unwrap().selectors, None);
    }

    #[test]
    fn garbage_is_rejected_with_a_readable_error() {
        // Like the reference client, a meta without `name` is accepted.
        let m = parse::<MetaResult>(json!({"title": "no name"}), "meta result").unwrap();
        assert_eq!(m.name, "");
        let e = parse::<MetaResult>(json!({"name": 3}), "meta result").unwrap_err().to_string();
        assert!(e.starts_with("invalid meta result:"), "{e}");
        let e = parse::<Annotation>(json!({"uri": "u", "item": {"title": "t"}, "range": {"start": {"line": "3", "character": 0}, "end": {"line": 3, "character": 1}}}), "annotation").unwrap_err().to_string();
        assert!(e.contains("invalid type: string \"3\", expected u32"), "{e}");
        let e = parse::<Annotation>(json!({"uri": "u", "item": {"title": "t"}, "range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}}}), "annotation").unwrap_err().to_string();
        assert!(e.contains("-1"), "{e}");
        let e = parse::<Vec<Mention>>(json!("not a list"), "mentions result").unwrap_err().to_string();
        assert!(e.contains("expected a sequence"), "{e}");
        let e = parse::<Item>(json!({"title": 5}), "item").unwrap_err().to_string();
        assert!(e.contains("expected a string"), "{e}");
        let e = serde_json::from_str::<MetaResult>("{\"name\": \"x\",").unwrap_err().to_string();
        assert!(e.contains("EOF"), "{e}");
    }

    #[test]
    fn lenient_lists_drop_only_the_bad_elements() {
        let (items, errors) =
            parse_list_lenient::<Item>(json!([{"title": "a"}, {"url": "no title"}, {"title": "c"}]), "items result")
                .unwrap();
        assert_eq!(items.iter().map(|i| i.title.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].starts_with("invalid items result[1]:") && errors[0].contains("title"), "{}", errors[0]);
        let (none, errors) = parse_list_lenient::<Item>(Value::Null, "items result").unwrap();
        assert!(none.is_empty() && errors.is_empty());
        let e = parse_list_lenient::<Item>(json!({"title": "x"}), "items result").unwrap_err();
        assert!(matches!(&e, DecodeError::NotAList { what, got: "an object" } if what == "items result"), "{e:?}");
        assert_eq!(e.to_string(), "invalid items result: expected a list, got an object");
    }

    #[test]
    fn positions_order_by_line_then_character() {
        let p = |line, character| Position { line, character };
        assert!(p(1, 9) < p(2, 0));
        assert!(p(2, 0) < p(2, 1));
    }
}
