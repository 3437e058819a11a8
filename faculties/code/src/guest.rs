//! The component: the `butler:hub/faculty` world's exports, and one program's run.

use std::cell::RefCell;
use std::path::Path;

use boa_engine::builtins::promise::PromiseState;
use boa_engine::object::builtins::JsPromise;
use boa_engine::{Context, JsError, JsNativeError, JsResult, JsString, JsValue, NativeFunction, Source, js_string};
use serde_json::{Value, json};

#[allow(missing_docs, clippy::all, clippy::pedantic, unsafe_code)]
mod bindings {
    wit_bindgen::generate!({
        world: "faculty",
        path: "../../wit/butler-hub@0.1.0",
        generate_all,
    });
}

use bindings::butler::faculty::types::{Failure, FailureKind};
use bindings::butler::hub::tools::{self, CallError};
use bindings::exports::butler::faculty::guest::Guest;

/// The manifest `describe()` returns.
const MANIFEST: &str = include_str!("../manifest.json");
/// `tools`, `console`.
const PRELUDE: &str = include_str!("prelude.js");
/// The most console output a run may write (all lines together).
const MAX_LOG_BYTES: usize = 64 << 10;
/// The largest result, as JSON text.
const MAX_RESULT_BYTES: usize = 1 << 20;
/// The most of an error's text a failure says (a program may throw a string of any size).
const MAX_ERROR_BYTES: usize = 16 << 10;

/// What one run has written and run into (an instance runs one program).
#[derive(Default)]
struct Run {
    logs: Vec<String>,
    log_bytes: usize,
    /// A cap the program passed: the run fails with it whatever the program did next.
    stopped: Option<Failure>,
}

thread_local! {
    static RUN: RefCell<Run> = RefCell::new(Run::default());
}

fn failure(kind: FailureKind, code: &str, message: impl Into<String>) -> Failure {
    Failure { kind, code: code.to_owned(), message: message.into(), details: None }
}

/// Records the first cap passed, and the error the program sees.
fn stop(code: &str, message: String) -> JsError {
    RUN.with(|run| {
        let mut run = run.borrow_mut();
        if run.stopped.is_none() {
            let kind = if code == "output_cap" { FailureKind::TooLarge } else { FailureKind::Failed };
            run.stopped = Some(failure(kind, code, message.clone()));
        }
    });
    JsNativeError::error().with_message(message).into()
}

fn text_arg(args: &[JsValue], index: usize, context: &mut Context) -> JsResult<String> {
    Ok(args.get(index).cloned().unwrap_or_default().to_string(context)?.to_std_string_escaped())
}

/// `__butlerLog(level, text)`.
fn log(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let level = text_arg(args, 0, context)?;
    let text = text_arg(args, 1, context)?;
    let line = if level == "log" { text } else { format!("[{level}] {text}") };
    let over = RUN.with(|run| {
        let mut run = run.borrow_mut();
        run.log_bytes += line.len() + 1;
        if run.log_bytes > MAX_LOG_BYTES {
            return true;
        }
        run.logs.push(line);
        false
    });
    if over {
        return Err(stop(
            "output_cap",
            format!("output cap: the program wrote more than {} KiB to the console", MAX_LOG_BYTES >> 10),
        ));
    }
    Ok(JsValue::undefined())
}

/// The error a program sees for a call the host did not make.
fn refused(error: CallError) -> JsError {
    match error {
        CallError::Limit(why) => stop("tool_call_limit", why),
        CallError::NotDeclared(why)
        | CallError::NotOffered(why)
        | CallError::InvalidArguments(why)
        | CallError::Failed(why) => JsNativeError::error().with_message(why).into(),
    }
}

/// `__butlerCallTool(name, argumentsJson)`: the tool's result as JSON text.
fn call_tool(_: &JsValue, args: &[JsValue], context: &mut Context) -> JsResult<JsValue> {
    let name = text_arg(args, 0, context)?;
    let arguments = text_arg(args, 1, context)?;
    let result = tools::call_tool(&name, &arguments).map_err(refused)?;
    Ok(JsValue::from(JsString::from(result.as_str())))
}

/// `__butlerListTools()`: the tools as JSON text.
fn list_tools(_: &JsValue, _: &[JsValue], _: &mut Context) -> JsResult<JsValue> {
    let listed = tools::list_tools().map_err(refused)?;
    Ok(JsValue::from(JsString::from(listed.as_str())))
}

/// What an error value says: a native error's message and where, else its text — its
/// first lines (a deep recursion's trace repeats one frame thousands of times), and at
/// most [`MAX_ERROR_BYTES`] of them.
fn said(error: JsError, context: &mut Context) -> String {
    const LINES: usize = 6;
    let mut text = full_text(error, context);
    if text.starts_with("EnginePanic") {
        // Boa gives up this way on a recursion through async functions without end.
        let first = text.lines().next().unwrap_or_default();
        text = format!("RuntimeLimitError: the engine could not go on ({first}); a recursion without end causes it");
    }
    let total = text.lines().count();
    if total > LINES {
        let kept: Vec<&str> = text.lines().take(LINES).collect();
        text = format!("{}\n    … {} more lines", kept.join("\n"), total - LINES);
    }
    if text.len() > MAX_ERROR_BYTES {
        let end = text.floor_char_boundary(MAX_ERROR_BYTES);
        text = format!("{}… ({} more bytes)", &text[..end], text.len() - end);
    }
    text
}

fn full_text(error: JsError, context: &mut Context) -> String {
    match error.try_native(context) {
        // Its kind and message: the position the engine appends is where the rejection
        // was taken up, in the code around the program, not where it was thrown.
        Ok(native) if native.message().trim().is_empty() => native.kind().to_string(),
        Ok(native) => format!("{}: {}", native.kind(), native.message().trim()),
        // A runtime limit (recursion, stack) has no value a program could catch: its text.
        Err(_) => match error.clone().into_opaque(context) {
            // A thrown object that is no `Error` (`throw {code: 42}`): as JSON, which says
            // more than `[object Object]`.
            Ok(value) if value.is_object() && !value.is_callable() => match value.to_json(context) {
                Ok(Some(json)) => json.to_string(),
                _ => error.to_string(),
            },
            Ok(value) => value.to_string(context).map_or_else(|_| error.to_string(), |t| t.to_std_string_escaped()),
            Err(_) => error.to_string(),
        },
    }
}

/// What comes before the program on its first line of the source that runs it.
const BEFORE_PROGRAM: &str = "((stringify) => (async () => {";

/// The name the engine gives the program's source in stack frames: `at f (program:2:4)`.
const PROGRAM_PATH: &str = "program";

/// Where in `code` the error `thrown` was made, as ` (line L, column C)`: the first frame
/// of its `stack` that is in the program (lines and columns as the program counts them),
/// none when it was made elsewhere (a tool's error, made in the prelude).
fn thrown_at(thrown: &JsValue, code: &str, context: &mut Context) -> Option<String> {
    let stack = thrown.as_object()?.get(js_string!("stack"), context).ok()?;
    let stack = stack.as_string()?.to_std_string_escaped();
    let frame = stack.lines().next()?;
    let place = frame.trim_end().strip_suffix(')')?.rsplit('(').next()?.strip_prefix(PROGRAM_PATH)?;
    let mut numbers = place.rsplit(':');
    let column: usize = numbers.next()?.parse().ok()?;
    let line: usize = numbers.next()?.parse().ok()?;
    if line == 0 || line > code.lines().count().max(1) {
        return None;
    }
    let column = if line == 1 { column.checked_sub(BEFORE_PROGRAM.chars().count())? } else { column };
    // Columns count from 1: a 0 is a place the engine does not know (an unknown name at
    // the top level), better unsaid than wrong.
    (column > 0).then(|| format!(" (line {line}, column {column})"))
}

/// `message` (the parser's) with its place counted as `code` counts it: a column on the
/// first line without what comes before the program (`at line 1, col 39`), and the line
/// after the program's last, where the code around it goes on, as its end.
fn parser_place(message: String, code: &str) -> String {
    const AT: &str = "at line 1, col ";
    let after = format!("at line {}, col ", code.lines().count().max(1) + 1);
    if let Some(start) = message.rfind(&after) {
        return format!("{}at the end of the program", &message[..start]);
    }
    let Some(start) = message.rfind(AT) else { return message };
    let digits = &message[start + AT.len()..];
    let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
    match digits[..end].parse::<usize>().ok().and_then(|col| col.checked_sub(BEFORE_PROGRAM.chars().count())) {
        Some(col) => format!("{}{AT}{col}{}", &message[..start], &digits[end..]),
        None => message,
    }
}

/// Runs `code` as the body of an async function: its result, or why not.
fn run(code: &str) -> Result<Value, Failure> {
    let mut context = Context::default();
    let natives: [(JsString, usize, NativeFunction); 3] = [
        (js_string!("__butlerCallTool"), 2, NativeFunction::from_fn_ptr(call_tool)),
        (js_string!("__butlerListTools"), 0, NativeFunction::from_fn_ptr(list_tools)),
        (js_string!("__butlerLog"), 2, NativeFunction::from_fn_ptr(log)),
    ];
    for (name, length, function) in natives {
        context
            .register_global_callable(name, length, function)
            .map_err(|e| failure(FailureKind::Internal, "prelude_failed", said(e, &mut context)))?;
    }
    context
        .eval(Source::from_bytes(PRELUDE))
        .map_err(|e| failure(FailureKind::Internal, "prelude_failed", said(e, &mut context)))?;
    // The program's first line is line 1 of the source. Its result is made JSON as
    // `JSON.stringify` makes it (`toJSON`, dates, functions left out), with the
    // `JSON.stringify` of before the program ran.
    let source = format!(
        "{BEFORE_PROGRAM}{code}\n}})().then((value) => {{ try {{ \
         const text = stringify(value === undefined ? null : value); return text === undefined ? 'null' : text; \
         }} catch (e) {{ return {{notJson: String(e && e.message || e)}}; }} }}))(JSON.stringify)"
    );
    let promise = match context.eval(Source::from_bytes(source.as_bytes()).with_path(Path::new(PROGRAM_PATH))) {
        Ok(value) => value,
        Err(e) => {
            let message = parser_place(said(e, &mut context), code);
            let code = if message.starts_with("SyntaxError") { "syntax_error" } else { "program_failed" };
            let kind = if code == "syntax_error" { FailureKind::InvalidInput } else { FailureKind::Failed };
            return Err(failure(kind, code, message));
        }
    };
    let jobs = context.run_jobs();
    if let Some(stopped) = RUN.with(|run| run.borrow_mut().stopped.take()) {
        return Err(stopped);
    }
    if let Err(e) = jobs {
        return Err(failure(FailureKind::Failed, "program_failed", said(e, &mut context)));
    }
    let state = promise
        .as_object()
        .and_then(|object| JsPromise::from_object(object.clone()).ok())
        .map(|promise| promise.state());
    let value = match state {
        Some(PromiseState::Fulfilled(value)) => value,
        Some(PromiseState::Rejected(reason)) => {
            let at = thrown_at(&reason, code, &mut context).unwrap_or_default();
            let message = said(JsError::from_opaque(reason), &mut context);
            return Err(failure(FailureKind::Failed, "program_failed", format!("Uncaught {message}{at}")));
        }
        Some(PromiseState::Pending) | None => {
            return Err(failure(
                FailureKind::Failed,
                "never_settled",
                "the program never finished: it awaits something that never resolves",
            ));
        }
    };
    let not_json =
        |why: String| failure(FailureKind::Failed, "result_not_json", format!("the result is not JSON: {why}"));
    let Some(text) = value.as_string().map(|text| text.to_std_string_escaped()) else {
        let why = value
            .as_object()
            .and_then(|object| object.get(js_string!("notJson"), &mut context).ok())
            .and_then(|why| why.to_string(&mut context).ok())
            .map_or_else(|| "it could not be written".to_owned(), |why| why.to_std_string_escaped());
        return Err(not_json(why));
    };
    let size = text.len();
    if size > MAX_RESULT_BYTES {
        return Err(failure(
            FailureKind::TooLarge,
            "result_too_large",
            format!(
                "the result is {} KiB as JSON, more than the {} KiB a run may return",
                size >> 10,
                MAX_RESULT_BYTES >> 10
            ),
        ));
    }
    serde_json::from_str(&text).map_err(|e| not_json(e.to_string()))
}

struct Code;

impl Guest for Code {
    fn describe() -> String {
        MANIFEST.to_owned()
    }

    fn invoke(command: String, input: String) -> Result<String, Failure> {
        if command != "run" {
            return Err(failure(FailureKind::NotFound, "unknown_command", format!("no command `{command}`")));
        }
        let input: Value = serde_json::from_str(&input)
            .map_err(|e| failure(FailureKind::InvalidInput, "invalid_args", format!("input is not JSON: {e}")))?;
        let Some(code) = input.get("code").and_then(Value::as_str) else {
            return Err(failure(FailureKind::InvalidInput, "invalid_args", "`code` (a string) is required"));
        };
        let result = run(code);
        let logs = RUN.with(|run| std::mem::take(&mut run.borrow_mut().logs));
        match result {
            Ok(result) => Ok(json!({"result": result, "logs": logs}).to_string()),
            // What the program logged before it failed is what tells why.
            Err(mut failed) if !logs.is_empty() => {
                failed.message = format!("{}\n\nconsole:\n{}", failed.message, logs.join("\n"));
                Err(failed)
            }
            Err(failed) => Err(failed),
        }
    }

    fn report(id: String) -> Result<String, Failure> {
        Err(failure(FailureKind::NotFound, "unknown_report", format!("no report `{id}`")))
    }
}

/// The exports, as `wit-bindgen` writes them (its glue is `unsafe`).
#[allow(unsafe_code)]
mod exported {
    use super::Code;
    super::bindings::export!(Code with_types_in super::bindings);
}
