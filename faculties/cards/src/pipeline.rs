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
/// and, unless it passes, `reason`. One `validity.check` call for all of them.
pub fn checks_now(checks: &[Check]) -> Vec<Value> {
    let mut entries: Vec<Value> =
        checks.iter().map(|check| serde_json::to_value(check).unwrap_or_else(|_| json!({}))).collect();
    if entries.is_empty() {
        return entries;
    }
    let verdicts: Vec<(Option<bool>, Option<String>)> =
        match host::call("validity.check", &json!({ "checks": entries })) {
            Ok(answer) => match answer.get("results").and_then(Value::as_array) {
                Some(results) if results.len() == entries.len() => results.iter().map(outcome).collect(),
                _ => vec![(None, Some("unexpected answer from validity.check".to_owned())); entries.len()],
            },
            Err(f) => {
                host::warn(&format!("validity.check failed: {}: {}", f.code, f.message));
                vec![(None, Some(format!("the check could not be evaluated ({})", f.code))); entries.len()]
            }
        };
    for (entry, (ok, reason)) in entries.iter_mut().zip(verdicts) {
        if let Some(fields) = entry.as_object_mut() {
            fields.insert("ok".to_owned(), json!(ok));
            if let Some(reason) = reason {
                fields.insert("reason".to_owned(), json!(reason));
            }
        }
    }
    entries
}

/// Reads one check's result: `r` itself, or the first of a one-check answer `{results:[r]}`,
/// `{checks:[r]}` or `[r]`, where `r` carries `ok` (or `passed` / `valid`) and optionally
/// `reason` (or `reasons`).
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
