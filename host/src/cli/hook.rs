//! `butler hook git install|uninstall [REPO]`: a git `post-commit` hook that records each
//! commit in the journal through `butler observe` (`source: git`, `type: milestone`), in
//! the background — it never fails or slows the commit and says nothing when no host runs.
//!
//! The hook goes where git looks for hooks (`core.hooksPath` included). A `post-commit`
//! hook already there is kept as `post-commit.butler-chained` and run by Butler's, with
//! the same arguments and exit status; `uninstall` puts it back.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};

/// The line that marks a `post-commit` hook as Butler's.
const MARK: &str = "# butler-hook: git post-commit";

/// The name the hook that was there first is kept under.
const CHAINED: &str = "post-commit.butler-chained";

/// At most this many changed paths are named in a commit's observation (the rest are
/// counted); each is cut to 80 bytes and the subject to 200, so the text stays within
/// the journal's 2000 characters.
pub const PATHS_SHOWN: usize = 20;

/// `butler hook …`.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// A git `post-commit` hook that records each commit as an observation.
    #[command(subcommand)]
    Git(Git),
}

/// `butler hook git …`.
#[derive(Debug, clap::Subcommand)]
pub enum Git {
    /// Install the hook in a repository (chaining a `post-commit` hook already there).
    Install(Repo),
    /// Remove the hook and put back the one it chained.
    Uninstall(Repo),
}

/// The repository a hook command acts on.
#[derive(Debug, clap::Args)]
pub struct Repo {
    /// The repository (any folder of its work tree) [default: the current folder]
    repo: Option<PathBuf>,
    /// The instance whose host the hook reports to [default: the one `butler observe`
    /// finds when the hook runs]
    #[arg(long, env = butler_host::instance::WORKDIR_ENV, value_name = "DIR")]
    workdir: Option<PathBuf>,
}

/// Runs `butler hook`.
pub fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Git(Git::Install(repo)) => install(&repo),
        Command::Git(Git::Uninstall(repo)) => uninstall(&repo),
    }
    .map(|()| ExitCode::SUCCESS)
}

/// The folder git runs `repo`'s hooks from (`core.hooksPath` when set).
fn hooks_dir(repo: &Repo) -> anyhow::Result<PathBuf> {
    let start = repo.repo.clone().unwrap_or_else(|| PathBuf::from("."));
    let top = PathBuf::from(git(&start, &["rev-parse", "--show-toplevel"])?);
    let hooks = PathBuf::from(git(&top, &["rev-parse", "--git-path", "hooks"])?);
    Ok(if hooks.is_absolute() { hooks } else { top.join(hooks) })
}

/// `git -C dir ARGS…`'s one line of output.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .context("cannot run `git` (is it installed?)")?;
    if !output.status.success() {
        bail!("{} is not in a git work tree: {}", dir.display(), String::from_utf8_lossy(&output.stderr).trim());
    }
    Ok(String::from_utf8(output.stdout).context("git answered with a path that is not UTF-8")?.trim_end().to_owned())
}

fn is_ours(hook: &Path) -> bool {
    std::fs::read_to_string(hook).is_ok_and(|text| text.lines().nth(1) == Some(MARK))
}

fn install(repo: &Repo) -> anyhow::Result<()> {
    let dir = hooks_dir(repo)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let hook = dir.join("post-commit");
    let chained = dir.join(CHAINED);
    let present = hook.symlink_metadata().is_ok();
    if present && !is_ours(&hook) {
        if chained.symlink_metadata().is_ok() {
            bail!(
                "{} is there already, and so is a post-commit hook that is not Butler's: move one of them away first",
                chained.display()
            );
        }
        std::fs::rename(&hook, &chained)
            .with_context(|| format!("cannot move {} to {}", hook.display(), chained.display()))?;
    }
    let butler = std::env::current_exe().context("cannot find this butler binary")?;
    let butler = butler.canonicalize().unwrap_or(butler);
    let workdir = repo.workdir.as_ref().map(|w| std::path::absolute(w).unwrap_or_else(|_| w.clone()));
    let script = script(&butler, workdir.as_deref())?;
    // Written beside it and renamed over it: a commit never runs half a hook.
    let fresh = dir.join("post-commit.butler-new");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o755)
        .open(&fresh)
        .with_context(|| format!("cannot write {}", fresh.display()))?;
    file.write_all(script.as_bytes())?;
    file.set_permissions(std::fs::Permissions::from_mode(0o755))?;
    drop(file);
    std::fs::rename(&fresh, &hook).with_context(|| format!("cannot write {}", hook.display()))?;
    outln!("installed {}: each commit becomes an observation (source git, type milestone)", hook.display());
    if chained.symlink_metadata().is_ok() {
        outln!("the post-commit hook that was there still runs after it (kept as {})", chained.display());
    }
    Ok(())
}

fn uninstall(repo: &Repo) -> anyhow::Result<()> {
    let dir = hooks_dir(repo)?;
    let hook = dir.join("post-commit");
    let chained = dir.join(CHAINED);
    if !is_ours(&hook) {
        bail!("no Butler hook to remove: {} is not Butler's (or is not there)", hook.display());
    }
    if chained.symlink_metadata().is_ok() {
        std::fs::rename(&chained, &hook).with_context(|| format!("cannot put back {}", chained.display()))?;
        outln!("removed Butler's post-commit hook; the one it chained is back at {}", hook.display());
    } else {
        std::fs::remove_file(&hook).with_context(|| format!("cannot remove {}", hook.display()))?;
        outln!("removed Butler's post-commit hook {}", hook.display());
    }
    Ok(())
}

/// `text` as one single-quoted shell word.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The hook: the commit's facts are read and sent in a detached background job whose
/// output goes nowhere, then the chained hook (if any) takes over the process.
fn script(butler: &Path, workdir: Option<&Path>) -> anyhow::Result<String> {
    let path = |p: &Path| p.to_str().map(quoted).with_context(|| format!("{} is not UTF-8", p.display()));
    let butler = path(butler)?;
    let workdir = workdir.map(path).transpose()?.unwrap_or_else(|| "''".to_owned());
    let shown = PATHS_SHOWN;
    Ok(format!(
        r#"#!/bin/sh
{MARK}
# Installed by `butler hook git install`; `butler hook git uninstall` removes it and puts
# back the hook it chains ({CHAINED}). Records each commit in Butler's journal through
# `butler observe` (source git, type milestone) in a background job whose output goes
# nowhere: the commit never waits for it or fails because of it, and nothing is said when
# no Butler host runs (the observation is then not recorded).
butler={butler}
workdir={workdir}
sha=$(git rev-parse -q --verify HEAD 2>/dev/null)
if [ -n "$sha" ] && [ -x "$butler" ]; then
  (
    top=$(git rev-parse --show-toplevel)
    branch=$(git symbolic-ref -q --short HEAD || echo 'detached HEAD')
    short=$(git rev-parse --short "$sha")
    subject=$(git log -1 --format=%s "$sha" | cut -c1-200)
    changed=$(git -c core.quotePath=false diff-tree --no-commit-id --name-only -r --root "$sha")
    total=$(printf '%s' "$changed" | grep -c '')
    {{
      printf '%s\n\ncommit %s on %s\n' "$subject" "$short" "$branch"
      if [ "$total" -gt 0 ]; then
        printf 'changed:\n'
        printf '%s\n' "$changed" | head -n {shown} | cut -c1-80
      fi
      if [ "$total" -gt {shown} ]; then
        printf '… and %s more\n' $((total - {shown}))
      fi
    }} | "$butler" observe --source git --type milestone --ref "git://$top#$sha" ${{workdir:+--workdir "$workdir"}} -
  ) </dev/null >/dev/null 2>&1 &
fi
chained="$(dirname "$0")/{CHAINED}"
if [ -f "$chained" ] && [ -x "$chained" ]; then
  exec "$chained" "$@"
fi
exit 0
"#
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_quoted_for_the_shell() {
        assert_eq!(quoted("/a b/it's"), r"'/a b/it'\''s'");
        let text = script(Path::new("/opt/butler"), Some(Path::new("/w it's"))).expect("script");
        assert!(text.starts_with(&format!("#!/bin/sh\n{MARK}\n")), "{text}");
        assert!(text.contains("butler='/opt/butler'\nworkdir='/w it'\\''s'\n"), "{text}");
        let text = script(Path::new("/opt/butler"), None).expect("script");
        assert!(text.contains("workdir=''\n"), "{text}");
    }
}
