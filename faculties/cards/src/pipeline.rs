//! Calls into the other pipeline faculties through the host. Each is best-effort where
//! the pipeline lets it be: a validity refresh that fails leaves the last verdict
//! standing, and a context that fails to rebuild is rebuilt by the next change.

use butler_faculty_kit::{Value, host, json};
use butler_store::check::Check;

/// Recomputes the verdicts of `ids`; a failure is logged and the last verdicts stand.
/// Whether any card was suspended or restored (or the answer did not say).
pub fn refresh_validity(ids: &[&str]) -> bool {
    match host::call("validity.refresh", &json!({ "ids": ids })) {
        Ok(answer) => {
            let moved = |key: &str| answer.get(key).and_then(Value::as_u64) != Some(0);
            moved("suspended") || moved("restored")
        }
        Err(f) => {
            host::warn(&format!("validity.refresh failed, the last verdicts stand: {}: {}", f.code, f.message));
            false
        }
    }
}

/// Rebuilds the compiled context; a failure is logged.
pub fn rebuild_context() {
    if let Err(f) = host::call("context.build", &json!({})) {
        host::warn(&format!("context.build failed: {}: {}", f.code, f.message));
    }
}

/// Each of `checks` with what it says now: `ok` (`null` when it could not be evaluated)
/// and, unless it passes, `reason`.
pub fn checks_now(checks: &[Check]) -> Vec<Value> {
    checks
        .iter()
        .map(|check| {
            let mut entry = serde_json::to_value(check).unwrap_or_else(|_| json!({}));
            let (ok, reason) = check_now(&entry);
            if let Some(fields) = entry.as_object_mut() {
                fields.insert("ok".to_owned(), json!(ok));
                if let Some(reason) = reason {
                    fields.insert("reason".to_owned(), json!(reason));
                }
            }
            entry
        })
        .collect()
}

/// What one check says now: `(ok, reason)`, `ok` being `None` when it could not be
/// evaluated.
pub fn check_now(check: &Value) -> (Option<bool>, Option<String>) {
    match host::call("validity.check", &json!({ "checks": [check] })) {
        Ok(answer) => outcome(&answer),
        Err(f) => {
            host::warn(&format!("validity.check failed: {}: {}", f.code, f.message));
            (None, Some(format!("the check could not be evaluated ({})", f.code)))
        }
    }
}

/// Reads the result of a one-check `validity.check` answer. Accepted: `{results:[r]}`,
/// `{checks:[r]}`, `[r]` or `r` itself, where `r` carries `ok` (or `passed` / `valid`) and
/// optionally `reason` (or `reasons`).
#[must_use]
pub fn outcome(answer: &Value) -> (Option<bool>, Option<String>) {
    let first = |key: &str| answer.get(key).and_then(Value::as_array).and_then(|a| a.first());
    let result = first("results")
        .or_else(|| first("checks"))
        .or_else(|| answer.as_array().and_then(|a| a.first()))
        .unwrap_or(answer);
    let ok = ["ok", "passed", "valid"].iter().find_map(|k| result.get(*k).and_then(Value::as_bool));
    let reason = result.get("reason").and_then(Value::as_str).map(str::to_owned).or_else(|| {
        let reasons: Vec<&str> =
            result.get("reasons").and_then(Value::as_array)?.iter().filter_map(Value::as_str).collect();
        (!reasons.is_empty()).then(|| reasons.join("; "))
    });
    match ok {
        Some(ok) => (Some(ok), reason),
        None => (None, Some(reason.unwrap_or_else(|| "unexpected answer from validity.check".to_owned()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_answers_in_several_shapes() {
        assert_eq!(outcome(&json!({"results": [{"ok": true}]})), (Some(true), None));
        assert_eq!(
            outcome(&json!({"checks": [{"type": "path", "path": "x", "ok": false, "reason": "missing"}]})),
            (Some(false), Some("missing".into()))
        );
        assert_eq!(outcome(&json!([{"passed": true}])), (Some(true), None));
        assert_eq!(outcome(&json!({"ok": false, "reasons": ["a", "b"]})), (Some(false), Some("a; b".into())));
        assert_eq!(outcome(&json!({"whatever": 1})).0, None);
    }
}
