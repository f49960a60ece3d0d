//! The onboarding questions (`assets/onboarding/questions.json`, compiled in) and the
//! validation of an answer against its question.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Kinds of answer a question takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuestionType {
    Text,
    Choice,
    MultiChoice,
    Boolean,
    UrlList,
}

/// Constraints beyond the type.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Validation {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    /// A regular expression a text answer must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<usize>,
    /// The only boolean accepted (an acknowledgement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub must_be: Option<bool>,
}

/// One question.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Question {
    pub key: String,
    pub text: String,
    #[serde(rename = "type")]
    pub kind: QuestionType,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
    pub required: bool,
    #[serde(default)]
    pub validation: Validation,
    /// The settings key the answer configures.
    #[serde(skip_serializing)]
    pub setting: String,
}

static QUESTIONS: LazyLock<Vec<Question>> = LazyLock::new(|| {
    // Compiled in and checked by a unit test, so it cannot fail at run time.
    serde_json::from_str(include_str!("../../../assets/onboarding/questions.json"))
        .expect("assets/onboarding/questions.json is valid")
});

/// Every question, in the order they are asked.
pub fn all() -> &'static [Question] {
    &QUESTIONS
}

/// The question with this key.
pub fn find(key: &str) -> Option<&'static Question> {
    all().iter().find(|q| q.key == key)
}

impl Question {
    /// The answer normalised, `Null` for a skipped optional question, or why it is invalid.
    pub fn validate(&self, answer: &Value) -> Result<Value, String> {
        if is_empty(answer) {
            return if self.required {
                // The API's error names the question key; the text is for people.
                Err("this question needs an answer".to_owned())
            } else {
                Ok(Value::Null)
            };
        }
        let v = &self.validation;
        match self.kind {
            QuestionType::Text => {
                let s = as_text(answer).ok_or("the answer must be text")?;
                let n = s.chars().count();
                if let Some(min) = v.min_length.filter(|m| n < *m) {
                    return Err(format!("the answer must be at least {min} characters"));
                }
                if let Some(max) = v.max_length.filter(|m| n > *m) {
                    return Err(format!("the answer must be at most {max} characters"));
                }
                if let Some(p) = &v.pattern {
                    let re = regex::Regex::new(p)
                        .map_err(|e| format!("bad pattern in question: {e}"))?;
                    if !re.is_match(&s) {
                        return Err("the answer contains characters that are not allowed".into());
                    }
                }
                Ok(Value::String(s))
            }
            QuestionType::Choice => {
                let s = as_text(answer).ok_or("the answer must be one option (text)")?;
                Ok(Value::String(self.option(&s)?))
            }
            QuestionType::MultiChoice => {
                let mut picked: Vec<String> = Vec::new();
                for item in as_list(answer).ok_or("the answer must be a list of options")? {
                    let o = self.option(&item)?;
                    if !picked.contains(&o) {
                        picked.push(o);
                    }
                }
                self.check_items(picked.len())?;
                Ok(json!(picked))
            }
            QuestionType::Boolean => {
                let b = as_bool(answer).ok_or("the answer must be true or false")?;
                if let Some(must) = v.must_be.filter(|m| *m != b) {
                    return Err(format!(
                        "this must be answered {must}: high-risk actions always need confirmation"
                    ));
                }
                Ok(Value::Bool(b))
            }
            QuestionType::UrlList => {
                let urls = as_list(answer).ok_or("the answer must be a list of URLs")?;
                let mut out: Vec<String> = Vec::new();
                for u in urls {
                    crate::kb::scrape::canonical_url(&u).map_err(|e| e.to_string())?;
                    if !out.contains(&u) {
                        out.push(u);
                    }
                }
                self.check_items(out.len())?;
                Ok(json!(out))
            }
        }
    }

    fn option(&self, given: &str) -> Result<String, String> {
        self.options
            .iter()
            .find(|o| o.eq_ignore_ascii_case(given.trim()))
            .cloned()
            .ok_or_else(|| format!("'{given}' is not one of: {}", self.options.join(", ")))
    }

    fn check_items(&self, n: usize) -> Result<(), String> {
        if let Some(min) = self.validation.min_items.filter(|m| n < *m) {
            return Err(format!("choose at least {min}"));
        }
        if let Some(max) = self.validation.max_items.filter(|m| n > *m) {
            return Err(format!("at most {max} items"));
        }
        Ok(())
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.trim().is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" | "on" => Some(true),
            "false" | "no" | "0" | "off" => Some(false),
            _ => None,
        },
        Value::Number(n) => n.as_i64().filter(|i| *i == 0 || *i == 1).map(|i| i == 1),
        _ => None,
    }
}

/// A JSON array of strings, or a string of items separated by commas or new lines.
fn as_list(v: &Value) -> Option<Vec<String>> {
    let items: Vec<String> = match v {
        Value::Array(a) => a
            .iter()
            .map(|i| i.as_str().map(|s| s.trim().to_owned()))
            .collect::<Option<_>>()?,
        Value::String(s) => s.split([',', '\n']).map(|p| p.trim().to_owned()).collect(),
        _ => return None,
    };
    Some(items.into_iter().filter(|s| !s.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_parse_and_map_to_settings() {
        assert!(all().len() >= 7);
        for q in all() {
            assert!(
                crate::assistant::settings::KEYS.contains(&q.setting.as_str()),
                "{}",
                q.key
            );
            if let Some(p) = &q.validation.pattern {
                regex::Regex::new(p).unwrap();
            }
        }
    }

    #[test]
    fn validates_each_type() {
        let name = find("company_name").unwrap();
        assert_eq!(name.validate(&json!(" Acme ")).unwrap(), json!("Acme"));
        assert!(name.validate(&json!("A")).is_err());
        assert!(name.validate(&json!("<b>")).is_err());
        assert!(name.validate(&json!(null)).is_err());
        let m = find("modules").unwrap();
        assert_eq!(
            m.validate(&json!("Knowledge_Base, system")).unwrap(),
            json!(["knowledge_base", "system"])
        );
        assert!(m.validate(&json!(["bogus"])).is_err());
        let b = find("confirm_high_risk").unwrap();
        assert!(b.validate(&json!("false")).is_err());
        assert_eq!(b.validate(&json!("yes")).unwrap(), json!(true));
        let u = find("knowledge_sources").unwrap();
        assert_eq!(u.validate(&json!([])).unwrap(), Value::Null);
        assert!(u.validate(&json!(["ftp://x"])).is_err());
    }
}
